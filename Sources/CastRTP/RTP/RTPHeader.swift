import CastCore

/// The RTP fixed header (RFC 3550 §5.1), its CSRC list and extension block.
///
///  0                   1                   2                   3
///  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |V=2|P|X|  CC   |M|     PT      |       sequence number         |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |                           timestamp                           |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |           synchronization source (SSRC) identifier            |
/// +=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+
/// |            contributing source (CSRC) identifiers             |
/// |                             ....                              |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///
/// The padding bit lives on `RTPPacket`, which owns the padding bytes.
public struct RTPHeader: Equatable, Sendable {
    public var marker: Bool
    public var payloadType: UInt8
    public var sequenceNumber: UInt16
    public var timestamp: UInt32
    public var ssrc: UInt32
    public var csrcs: [UInt32]
    public var extensions: RTPExtensionBlock?

    public static let fixedLength = 12

    public init(marker: Bool = false, payloadType: UInt8, sequenceNumber: UInt16, timestamp: UInt32,
                ssrc: UInt32, csrcs: [UInt32] = [], extensions: RTPExtensionBlock? = nil) {
        self.marker = marker
        self.payloadType = payloadType
        self.sequenceNumber = sequenceNumber
        self.timestamp = timestamp
        self.ssrc = ssrc
        self.csrcs = csrcs
        self.extensions = extensions
    }

    /// Bytes this header occupies on the wire.
    public var encodedLength: Int {
        Self.fixedLength + 4 * csrcs.count + (extensions?.encodedLength ?? 0)
    }

    /// Writes the header; `inlineExtensions`, when given, is written as the extension
    /// block (the send path's stamped values) and `extensions` must then be nil.
    func write(into w: inout ByteWriter, padding: Bool, inlineExtensions: RTPInlineExtensions? = nil) throws {
        guard csrcs.count <= 15 else { throw CastError(.usage, "RTP allows at most 15 CSRCs, got \(csrcs.count)") }
        guard payloadType < 128 else { throw CastError(.usage, "RTP payload type \(payloadType) does not fit in 7 bits") }
        guard extensions == nil || inlineExtensions == nil else {
            throw CastError(.usage, "an RTP header has one extension block, not two")
        }
        let hasExtensions = extensions != nil || inlineExtensions != nil
        w.u8(2 << 6 | (padding ? 0x20 : 0) | (hasExtensions ? 0x10 : 0) | UInt8(csrcs.count))
        w.u8((marker ? 0x80 : 0) | payloadType)
        w.u16(sequenceNumber)
        w.u32(timestamp)
        w.u32(ssrc)
        for c in csrcs { w.u32(c) }
        try extensions?.write(into: &w)
        try inlineExtensions?.write(into: &w)
    }

    /// Reads a header; returns it with the padding bit, which the packet needs.
    static func read(from r: inout ByteReader) throws -> (RTPHeader, padding: Bool) {
        let b0 = try r.u8("the RTP header")
        guard b0 >> 6 == 2 else { throw CastError(.malformed, "RTP version \(b0 >> 6), expected 2") }
        let b1 = try r.u8("the RTP header")
        let seq = try r.u16("the RTP sequence number")
        let ts = try r.u32("the RTP timestamp")
        let ssrc = try r.u32("the RTP SSRC")
        var csrcs: [UInt32] = []
        for _ in 0..<Int(b0 & 0x0f) { csrcs.append(try r.u32("an RTP CSRC")) }
        let ext = b0 & 0x10 != 0 ? try RTPExtensionBlock.read(from: &r) : nil
        let header = RTPHeader(marker: b1 & 0x80 != 0, payloadType: b1 & 0x7f, sequenceNumber: seq,
                               timestamp: ts, ssrc: ssrc, csrcs: csrcs, extensions: ext)
        return (header, b0 & 0x20 != 0)
    }
}
