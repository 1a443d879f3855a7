import CastCore

/// The common RTCP header (RFC 3550 §6.4.1, RFC 4585 §6.1).
///
///  0                   1                   2                   3
///  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |V=2|P|  RC/FMT |      PT       |             length            |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///
/// `length` is the packet's size in 32-bit words minus one.
public struct RTCPHeader: Equatable, Sendable {
    public var padding: Bool
    /// Report count (SR/RR), source count (SDES/BYE) or feedback message type (RTPFB/PSFB).
    public var count: UInt8
    public var packetType: UInt8
    /// Length in 32-bit words minus one, as on the wire.
    public var length: UInt16

    public static let senderReport: UInt8 = 200
    public static let receiverReport: UInt8 = 201
    public static let sourceDescription: UInt8 = 202
    public static let goodbye: UInt8 = 203
    /// RFC 4585 §6.1: transport-layer feedback.
    public static let transportFeedback: UInt8 = 205
    /// RFC 4585 §6.1: payload-specific feedback.
    public static let payloadFeedback: UInt8 = 206

    public init(padding: Bool = false, count: UInt8, packetType: UInt8, length: UInt16) {
        self.padding = padding
        self.count = count
        self.packetType = packetType
        self.length = length
    }

    static func read(from r: inout ByteReader) throws -> RTCPHeader {
        let b0 = try r.u8("the RTCP header")
        guard b0 >> 6 == 2 else { throw CastError(.malformed, "RTCP version \(b0 >> 6), expected 2") }
        let pt = try r.u8("the RTCP packet type")
        let len = try r.u16("the RTCP length")
        return RTCPHeader(padding: b0 & 0x20 != 0, count: b0 & 0x1f, packetType: pt, length: len)
    }
}

/// A packet body that knows its RTCP type; `RTCPPacket` writes the header.
protocol RTCPBody {
    static var packetType: UInt8 { get }
    /// The 5-bit RC/SC/FMT field.
    var countField: UInt8 { get }
    func writeBody(into w: inout ByteWriter) throws
}
