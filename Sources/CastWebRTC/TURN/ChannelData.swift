import CastCore

/// A TURN ChannelData message (RFC 8656 §12.4): application data to or from one peer
/// with a 4-byte header instead of a 36-byte Send/Data indication.
///
///     0                   1                   2                   3
///     0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
///    +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///    |         Channel Number        |            Length             |
///    +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///    |                                                               |
///    /                       Application Data                        /
///    |                                                               |
///    |                               +-------------------------------+
///    |                               |
///    +-------------------------------+
///
/// Over TCP and TLS the message is padded to a multiple of 4 bytes and the padding
/// is not counted in Length (§12.5); over UDP castd sends it unpadded and accepts
/// up to 3 bytes of padding.
public struct ChannelData: Equatable, Sendable {
    /// §12: the numbers a client may bind (0x4000 through 0x4FFF).
    public static let channelRange: ClosedRange<UInt16> = 0x4000...0x4FFF

    public var channel: UInt16
    public var data: [UInt8]

    public init(channel: UInt16, data: [UInt8]) {
        self.channel = channel
        self.data = data
    }

    /// The wire bytes; `padded` for stream transports (§12.5). Data longer than 65535
    /// bytes cannot be framed; the caller never has such a datagram (the MTU bounds it).
    public func encode(padded: Bool) -> [UInt8] {
        let pad = padded ? (4 - data.count % 4) % 4 : 0
        var w = ByteWriter(capacity: 4 + data.count + pad)
        w.u16(channel)
        w.u16(UInt16(truncatingIfNeeded: data.count))
        w.append(data)
        w.zeros(pad)
        return w.bytes
    }

    /// Parses one datagram (UDP) or one frame cut by `TURNStreamFramer`. Throws on a
    /// channel number outside 0x4000–0x4FFF, a length beyond the bytes, or more than
    /// 3 bytes after the data; never traps.
    public init(decoding d: [UInt8]) throws {
        var r = ByteReader(d)
        let channel = try r.u16("the ChannelData channel number")
        guard Self.channelRange.contains(channel) else {
            throw CastError(.malformed, "ChannelData channel number 0x\(String(channel, radix: 16)) is outside 0x4000–0x4FFF")
        }
        let n = Int(try r.u16("the ChannelData length"))
        let data = Array(try r.take(n, "the ChannelData application data"))
        guard r.remaining <= 3 else {
            throw CastError(.malformed, "ChannelData has \(r.remaining) bytes after its \(n) data bytes (padding is at most 3)")
        }
        self.channel = channel
        self.data = data
    }
}

/// Cuts a TCP or TLS byte stream from a TURN server into whole messages (RFC 8656 §12.5):
/// STUN messages (20-byte header plus the Length, already a multiple of 4) and ChannelData
/// frames (4-byte header plus the Length rounded up to 4). Pure: bytes in, frames out.
///
/// The first byte tells the two apart (RFC 7983: 0–3 STUN, 64–79 ChannelData); anything
/// else means the stream lost its framing, which cannot be recovered, so `push` throws and
/// the owner closes the connection.
public struct TURNStreamFramer: Sendable {
    private var buffer: [UInt8] = []
    private var start = 0

    public init() {}

    /// Bytes held that do not yet make a whole frame.
    public var pendingBytes: Int { buffer.count - start }

    /// Appends `bytes` and returns every whole frame they complete, in order.
    public mutating func push(_ bytes: [UInt8]) throws -> [[UInt8]] {
        buffer.append(contentsOf: bytes)
        var frames: [[UInt8]] = []
        while buffer.count - start >= 4 {
            let b0 = buffer[start]
            let length = Int(buffer[start + 2]) << 8 | Int(buffer[start + 3])
            let total: Int
            switch b0 {
            case 0...3:
                guard length % 4 == 0 else {
                    throw CastError(.malformed, "TURN stream: STUN length \(length) is not a multiple of 4; the stream lost its framing")
                }
                total = 20 + length
            case 0x40...0x4F:
                total = 4 + length + (4 - length % 4) % 4
            default:
                throw CastError(.malformed, "TURN stream: first byte 0x\(String(b0, radix: 16)) is neither STUN nor ChannelData; the stream lost its framing")
            }
            guard buffer.count - start >= total else { break }
            frames.append(Array(buffer[start..<start + total]))
            start += total
        }
        // Compact once the consumed prefix is large, so the buffer never grows without bound.
        if start > 0, start >= buffer.count / 2 {
            buffer.removeFirst(start)
            start = 0
        }
        return frames
    }
}
