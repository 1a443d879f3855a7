import CastCore

/// FIR (RFC 5104 §4.3.1): PSFB (PT=206), FMT=4. The media SSRC field is unused
/// (0); each FCI entry names a media sender and a command sequence number.
///
/// FCI:
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |                              SSRC                             |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// | Seq nr.       |    Reserved                                   |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
public struct FullIntraRequest: Equatable, Sendable, RTCPBody {
    public struct Entry: Equatable, Sendable {
        public var ssrc: UInt32
        public var sequenceNumber: UInt8
        public init(ssrc: UInt32, sequenceNumber: UInt8) { self.ssrc = ssrc; self.sequenceNumber = sequenceNumber }
    }

    public var senderSSRC: UInt32
    public var mediaSSRC: UInt32
    public var entries: [Entry]

    static let packetType = RTCPHeader.payloadFeedback
    static let format: UInt8 = 4
    var countField: UInt8 { Self.format }

    public init(senderSSRC: UInt32, mediaSSRC: UInt32 = 0, entries: [Entry]) {
        self.senderSSRC = senderSSRC
        self.mediaSSRC = mediaSSRC
        self.entries = entries
    }

    func writeBody(into w: inout ByteWriter) throws {
        w.u32(senderSSRC)
        w.u32(mediaSSRC)
        for e in entries { w.u32(e.ssrc); w.u8(e.sequenceNumber); w.zeros(3) }
    }

    static func parse(body: ArraySlice<UInt8>) throws -> FullIntraRequest {
        var r = ByteReader(Array(body))
        let sender = try r.u32("the FIR sender SSRC")
        let media = try r.u32("the FIR media SSRC")
        guard r.remaining % 8 == 0, r.remaining > 0 else {
            throw CastError(.malformed, "FIR FCI must be one or more 8-byte entries, got \(r.remaining) bytes")
        }
        var entries: [Entry] = []
        while !r.isAtEnd {
            let ssrc = try r.u32()
            let seq = try r.u8()
            try r.skip(3, "FIR reserved bytes")
            entries.append(Entry(ssrc: ssrc, sequenceNumber: seq))
        }
        return FullIntraRequest(senderSSRC: sender, mediaSSRC: media, entries: entries)
    }
}
