import CastCore

/// An RTP packet (RFC 3550 §5.1): header, payload and optional padding.
public struct RTPPacket: Equatable, Sendable {
    public var header: RTPHeader
    public var payload: [UInt8]
    /// Padding bytes after the payload, the last of which holds their count
    /// (RFC 3550 §5.1, P bit). 0 means no padding.
    public var paddingLength: UInt8

    public init(header: RTPHeader, payload: [UInt8], paddingLength: UInt8 = 0) {
        self.header = header
        self.payload = payload
        self.paddingLength = paddingLength
    }

    /// Bytes this packet occupies on the wire (before SRTP).
    public var encodedLength: Int { header.encodedLength + payload.count + Int(paddingLength) }

    public func serialize() throws -> [UInt8] {
        var w = ByteWriter(capacity: encodedLength)
        try header.write(into: &w, padding: paddingLength > 0)
        w.append(payload)
        if paddingLength > 0 {
            w.zeros(Int(paddingLength) - 1)
            w.u8(paddingLength)
        }
        return w.bytes
    }

    /// Parses a packet. Malformed input throws `CastError` (`.malformed` or
    /// `.truncated`); it never traps.
    public static func parse(_ bytes: [UInt8]) throws -> RTPPacket {
        var r = ByteReader(bytes)
        let (header, padded) = try RTPHeader.read(from: &r)
        var body = r.rest()
        var pad: UInt8 = 0
        if padded {
            // RFC 3550 §5.1: the last octet counts the padding, itself included.
            guard let last = body.last, last > 0, Int(last) <= body.count else {
                throw CastError(.malformed, "RTP padding count does not fit the packet")
            }
            pad = last
            body = body.dropLast(Int(last))
        }
        return RTPPacket(header: header, payload: Array(body), paddingLength: pad)
    }
}
