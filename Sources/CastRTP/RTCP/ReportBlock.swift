import CastCore

/// A reception report block (RFC 3550 §6.4.1), 24 bytes.
///
/// +=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+
/// |                 SSRC_1 (SSRC of first source)                 |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// | fraction lost |       cumulative number of packets lost       |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |           extended highest sequence number received           |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |                      interarrival jitter                      |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |                         last SR (LSR)                         |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |                   delay since last SR (DLSR)                  |
/// +=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+
public struct ReportBlock: Equatable, Sendable {
    public var ssrc: UInt32
    /// Fraction lost since the previous report, in 1/256 units.
    public var fractionLost: UInt8
    /// Cumulative packets lost: a signed 24-bit value (duplicates can make it negative).
    public var cumulativeLost: Int32
    public var extendedHighestSequence: UInt32
    /// Interarrival jitter in RTP timestamp units.
    public var jitter: UInt32
    /// Middle 32 bits of the NTP time of the last SR received (0: none yet).
    public var lastSenderReport: UInt32
    /// Delay since that SR, in 1/65536 s.
    public var delaySinceLastSenderReport: UInt32

    public static let length = 24

    public init(ssrc: UInt32, fractionLost: UInt8, cumulativeLost: Int32, extendedHighestSequence: UInt32,
                jitter: UInt32, lastSenderReport: UInt32, delaySinceLastSenderReport: UInt32) {
        self.ssrc = ssrc
        self.fractionLost = fractionLost
        self.cumulativeLost = cumulativeLost
        self.extendedHighestSequence = extendedHighestSequence
        self.jitter = jitter
        self.lastSenderReport = lastSenderReport
        self.delaySinceLastSenderReport = delaySinceLastSenderReport
    }

    func write(into w: inout ByteWriter) {
        w.u32(ssrc)
        w.u8(fractionLost)
        // Clamp to the signed 24-bit range (RFC 3550 §6.4.1 / Appendix A.3).
        let lost = max(-0x80_0000, min(0x7f_ffff, cumulativeLost))
        w.u24(UInt32(bitPattern: lost) & 0xff_ffff)
        w.u32(extendedHighestSequence)
        w.u32(jitter)
        w.u32(lastSenderReport)
        w.u32(delaySinceLastSenderReport)
    }

    static func read(from r: inout ByteReader) throws -> ReportBlock {
        let ssrc = try r.u32("a report block")
        let fraction = try r.u8("a report block")
        let raw = try r.u24("a report block")
        let lost = Int32(bitPattern: raw << 8) >> 8   // sign-extend 24 bits
        return ReportBlock(ssrc: ssrc, fractionLost: fraction, cumulativeLost: lost,
                           extendedHighestSequence: try r.u32("a report block"), jitter: try r.u32("a report block"),
                           lastSenderReport: try r.u32("a report block"),
                           delaySinceLastSenderReport: try r.u32("a report block"))
    }
}
