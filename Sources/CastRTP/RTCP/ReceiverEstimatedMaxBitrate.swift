import CastCore

/// REMB (draft-alvestrand-rmcat-remb-03 §2.2): PSFB (PT=206), FMT=15
/// (application layer feedback) with the "REMB" identifier.
///
/// |V=2|P| FMT=15  |   PT=206      |             length            |
/// |                  SSRC of packet sender                        |
/// |                  SSRC of media source (0)                     |
/// |  Unique identifier 'R' 'E' 'M' 'B'                            |
/// |  Num SSRC     | BR Exp    |  BR Mantissa                      |
/// |   SSRC feedback                                               |  (Num SSRC times)
///
/// The bitrate is mantissa (18 bits) × 2^exp (6 bits), in bits per second.
public struct ReceiverEstimatedMaxBitrate: Equatable, Sendable, RTCPBody {
    public var senderSSRC: UInt32
    public var mediaSSRC: UInt32
    /// Bits per second, as decoded from the wire (exact after a round trip only
    /// when it fits in 18 bits of mantissa).
    public var bitrate: UInt64
    public var ssrcs: [UInt32]

    static let packetType = RTCPHeader.payloadFeedback
    static let format: UInt8 = 15
    static let identifier: [UInt8] = Array("REMB".utf8)
    var countField: UInt8 { Self.format }

    public init(senderSSRC: UInt32, mediaSSRC: UInt32 = 0, bitrate: UInt64, ssrcs: [UInt32]) {
        self.senderSSRC = senderSSRC
        self.mediaSSRC = mediaSSRC
        self.bitrate = bitrate
        self.ssrcs = ssrcs
    }

    /// The smallest exponent whose 18-bit mantissa holds the rate (rounding down).
    static func encode(_ bitrate: UInt64) -> (exponent: UInt8, mantissa: UInt32) {
        var exp: UInt8 = 0
        var m = bitrate
        while m > 0x3_ffff && exp < 63 { m >>= 1; exp += 1 }
        return (exp, UInt32(min(m, 0x3_ffff)))
    }

    func writeBody(into w: inout ByteWriter) throws {
        guard ssrcs.count <= 255 else { throw CastError(.usage, "a REMB lists at most 255 SSRCs") }
        w.u32(senderSSRC)
        w.u32(mediaSSRC)
        w.append(Self.identifier)
        let (exp, mantissa) = Self.encode(bitrate)
        w.u8(UInt8(ssrcs.count))
        w.u24(UInt32(exp) << 18 | mantissa)
        for s in ssrcs { w.u32(s) }
    }

    /// nil when the application-layer feedback is not a REMB.
    static func parse(body: ArraySlice<UInt8>) throws -> ReceiverEstimatedMaxBitrate? {
        var r = ByteReader(Array(body))
        let sender = try r.u32("the REMB sender SSRC")
        let media = try r.u32("the REMB media SSRC")
        guard r.remaining >= 4, Array(try r.take(4)) == identifier else { return nil }
        let n = try r.u8("the REMB SSRC count")
        let v = try r.u24("the REMB bitrate")
        let exp = v >> 18, mantissa = UInt64(v & 0x3_ffff)
        // 18 bits shifted by up to 63 overflows 64 bits: saturate.
        let bitrate = mantissa.leadingZeroBitCount >= Int(exp) ? mantissa << exp : UInt64.max
        var ssrcs: [UInt32] = []
        for _ in 0..<n { ssrcs.append(try r.u32("a REMB SSRC")) }
        return ReceiverEstimatedMaxBitrate(senderSSRC: sender, mediaSSRC: media, bitrate: bitrate, ssrcs: ssrcs)
    }
}
