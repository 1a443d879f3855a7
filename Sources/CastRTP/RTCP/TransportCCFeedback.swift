import CastCore

/// Transport-wide congestion control feedback
/// (draft-holmer-rmcat-transport-wide-cc-extensions-01 §3.1): RTPFB (PT=205), FMT=15.
///
/// |V=2|P|  FMT=15 |    PT=205     |           length              |
/// |                     SSRC of packet sender                     |
/// |                      SSRC of media source                     |
/// |      base sequence number     |      packet status count      |
/// |                 reference time                | fb pkt. count |
/// |          packet chunk         |         packet chunk          |  ...
/// |  recv delta   |  recv delta   |  ...          | zero padding  |
///
/// Packet chunks (§3.1.3, §3.1.4):
///   run length:    |0| S (2) |        run length (13)        |
///   status vector: |1|s| 14 one-bit or 7 two-bit symbols     |
/// Symbols: 0 not received, 1 received with a small delta (1 byte, 0…63.75 ms),
/// 2 received with a large or negative delta (2 bytes signed), 3 reserved.
/// Deltas are in 250 µs units; the reference time in 64 ms units (24-bit signed).
public struct TransportCCFeedback: Equatable, Sendable, RTCPBody {
    public struct PacketStatus: Equatable, Sendable {
        public var sequenceNumber: UInt16
        /// Receive delta from the previous received packet (or the reference
        /// time, for the first), in 250 µs units; nil when not received.
        public var receiveDelta: Int16?
        public init(sequenceNumber: UInt16, receiveDelta: Int16?) {
            self.sequenceNumber = sequenceNumber
            self.receiveDelta = receiveDelta
        }
    }

    public var senderSSRC: UInt32
    public var mediaSSRC: UInt32
    public var baseSequenceNumber: UInt16
    /// Signed 24-bit, 64 ms units.
    public var referenceTime: Int32
    public var feedbackPacketCount: UInt8
    /// One status per sequence number from the base, in order.
    public var packets: [PacketStatus]

    static let packetType = RTCPHeader.transportFeedback
    static let format: UInt8 = 15
    var countField: UInt8 { Self.format }

    public static let deltaUnitNanoseconds: Int64 = 250_000
    public static let referenceUnitNanoseconds: Int64 = 64_000_000

    public init(senderSSRC: UInt32, mediaSSRC: UInt32, baseSequenceNumber: UInt16, referenceTime: Int32,
                feedbackPacketCount: UInt8, receiveDeltas: [Int16?]) {
        self.senderSSRC = senderSSRC
        self.mediaSSRC = mediaSSRC
        self.baseSequenceNumber = baseSequenceNumber
        self.referenceTime = referenceTime
        self.feedbackPacketCount = feedbackPacketCount
        self.packets = receiveDeltas.enumerated().map {
            PacketStatus(sequenceNumber: baseSequenceNumber &+ UInt16(truncatingIfNeeded: $0.offset), receiveDelta: $0.element)
        }
    }

    /// Arrival time of each packet on the receiver's clock (reference time plus
    /// the running sum of deltas); nil for packets reported lost.
    public var arrivals: [(sequenceNumber: UInt16, arrival: Duration?)] {
        var t = Int64(referenceTime) * Self.referenceUnitNanoseconds
        return packets.map { p in
            guard let d = p.receiveDelta else { return (p.sequenceNumber, nil) }
            t += Int64(d) * Self.deltaUnitNanoseconds
            return (p.sequenceNumber, .nanoseconds(t))
        }
    }

    static func symbol(_ delta: Int16?) -> UInt8 {
        guard let d = delta else { return 0 }
        return (0...255).contains(d) ? 1 : 2
    }

    /// Chunks for the symbols, greedily: a run-length chunk for a run of 14 or
    /// more (or for the whole remainder), else a one-bit vector when the next 14
    /// symbols need no large delta, else a two-bit vector of 7. Unused trailing
    /// slots of the last vector are 0; the status count tells the receiver.
    static func chunks(_ symbols: [UInt8]) -> [UInt16] {
        var out: [UInt16] = []
        var i = 0
        while i < symbols.count {
            var run = 1
            while i + run < symbols.count, symbols[i + run] == symbols[i], run < 0x1fff { run += 1 }
            let remaining = symbols.count - i
            if run >= 14 || run == remaining {
                out.append(UInt16(symbols[i]) << 13 | UInt16(run))
                i += run
            } else if symbols[i..<min(i + 14, symbols.count)].allSatisfy({ $0 <= 1 }) {
                var c: UInt16 = 0x8000
                for k in 0..<min(14, remaining) { c |= UInt16(symbols[i + k]) << (13 - k) }
                out.append(c)
                i += min(14, remaining)
            } else {
                var c: UInt16 = 0xc000
                for k in 0..<min(7, remaining) { c |= UInt16(symbols[i + k]) << (12 - 2 * k) }
                out.append(c)
                i += min(7, remaining)
            }
        }
        return out
    }

    func writeBody(into w: inout ByteWriter) throws {
        guard packets.count <= Int(UInt16.max) else { throw CastError(.usage, "TWCC feedback covers at most 65535 packets") }
        guard (-0x80_0000...0x7f_ffff).contains(referenceTime) else {
            throw CastError(.usage, "TWCC reference time \(referenceTime) does not fit 24 signed bits")
        }
        let start = w.count
        w.u32(senderSSRC)
        w.u32(mediaSSRC)
        w.u16(baseSequenceNumber)
        w.u16(UInt16(packets.count))
        w.u24(UInt32(bitPattern: referenceTime) & 0xff_ffff)
        w.u8(feedbackPacketCount)
        let symbols = packets.map { Self.symbol($0.receiveDelta) }
        for c in Self.chunks(symbols) { w.u16(c) }
        for (p, s) in zip(packets, symbols) {
            switch s {
            case 1: w.u8(UInt8(p.receiveDelta!))
            case 2: w.u16(UInt16(bitPattern: p.receiveDelta!))
            default: break
            }
        }
        let used = w.count - start
        if used % 4 != 0 { w.zeros(4 - used % 4) }
    }

    static func parse(body: ArraySlice<UInt8>) throws -> TransportCCFeedback {
        var r = ByteReader(Array(body))
        let sender = try r.u32("the TWCC sender SSRC")
        let media = try r.u32("the TWCC media SSRC")
        let base = try r.u16("the TWCC base sequence number")
        let count = Int(try r.u16("the TWCC status count"))
        let ref = try r.u24("the TWCC reference time")
        let fbCount = try r.u8("the TWCC feedback count")
        var symbols: [UInt8] = []
        symbols.reserveCapacity(count)
        while symbols.count < count {
            let c = try r.u16("a TWCC packet chunk")
            let want = count - symbols.count
            if c & 0x8000 == 0 {
                let s = UInt8((c >> 13) & 3)
                let run = Int(c & 0x1fff)
                guard run > 0 else { throw CastError(.malformed, "TWCC run-length chunk with a run of 0") }
                symbols.append(contentsOf: repeatElement(s, count: min(run, want)))
            } else if c & 0x4000 == 0 {
                for k in 0..<min(14, want) { symbols.append(UInt8((c >> (13 - k)) & 1)) }
            } else {
                for k in 0..<min(7, want) { symbols.append(UInt8((c >> (12 - 2 * k)) & 3)) }
            }
        }
        var deltas: [Int16?] = []
        deltas.reserveCapacity(count)
        for s in symbols {
            switch s {
            case 0: deltas.append(nil)
            case 1: deltas.append(Int16(try r.u8("a TWCC receive delta")))
            case 2: deltas.append(Int16(bitPattern: try r.u16("a TWCC receive delta")))
            default: throw CastError(.malformed, "TWCC packet status symbol 3 is reserved")
            }
        }
        return TransportCCFeedback(senderSSRC: sender, mediaSSRC: media, baseSequenceNumber: base,
                                   referenceTime: Int32(bitPattern: ref << 8) >> 8, feedbackPacketCount: fbCount,
                                   receiveDeltas: deltas)
    }
}
