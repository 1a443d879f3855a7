import CastCore

/// Generic NACK (RFC 4585 §6.2.1): RTPFB (PT=205), FMT=1.
///
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |V=2|P|  FMT=1  |    PT=205     |          length               |
/// |                  SSRC of packet sender                        |
/// |                  SSRC of media source                         |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |            PID                |             BLP               |  (one or more)
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///
/// PID is a lost sequence number; bit i of BLP (LSB = 0) means PID+i+1 is lost too.
public struct GenericNACK: Equatable, Sendable, RTCPBody {
    public struct Entry: Equatable, Sendable {
        public var packetID: UInt16
        public var lostBitmask: UInt16
        public init(packetID: UInt16, lostBitmask: UInt16) { self.packetID = packetID; self.lostBitmask = lostBitmask }
    }

    public var senderSSRC: UInt32
    public var mediaSSRC: UInt32
    public var entries: [Entry]

    static let packetType = RTCPHeader.transportFeedback
    static let format: UInt8 = 1
    var countField: UInt8 { Self.format }

    public init(senderSSRC: UInt32, mediaSSRC: UInt32, entries: [Entry]) {
        self.senderSSRC = senderSSRC
        self.mediaSSRC = mediaSSRC
        self.entries = entries
    }

    /// Builds the entries from lost sequence numbers (in send order; wrap-aware).
    public init(senderSSRC: UInt32, mediaSSRC: UInt32, lost: [UInt16]) {
        var entries: [Entry] = []
        for s in lost {
            if var last = entries.last {
                let d = s &- last.packetID
                if d >= 1, d <= 16 {
                    last.lostBitmask |= 1 << (d - 1)
                    entries[entries.count - 1] = last
                    continue
                }
            }
            entries.append(Entry(packetID: s, lostBitmask: 0))
        }
        self.init(senderSSRC: senderSSRC, mediaSSRC: mediaSSRC, entries: entries)
    }

    /// Every sequence number the NACK reports lost, in order.
    public var lostSequenceNumbers: [UInt16] {
        var out: [UInt16] = []
        for e in entries {
            out.append(e.packetID)
            for i in 0..<16 where e.lostBitmask & (1 << i) != 0 { out.append(e.packetID &+ UInt16(i) &+ 1) }
        }
        return out
    }

    func writeBody(into w: inout ByteWriter) throws {
        w.u32(senderSSRC)
        w.u32(mediaSSRC)
        for e in entries { w.u16(e.packetID); w.u16(e.lostBitmask) }
    }

    static func parse(body: ArraySlice<UInt8>) throws -> GenericNACK {
        var r = ByteReader(Array(body))
        let sender = try r.u32("the NACK sender SSRC")
        let media = try r.u32("the NACK media SSRC")
        guard r.remaining % 4 == 0, r.remaining > 0 else {
            throw CastError(.malformed, "NACK FCI must be one or more 4-byte entries, got \(r.remaining) bytes")
        }
        var entries: [Entry] = []
        while !r.isAtEnd { entries.append(Entry(packetID: try r.u16(), lostBitmask: try r.u16())) }
        return GenericNACK(senderSSRC: sender, mediaSSRC: media, entries: entries)
    }
}
