import CastCore

/// RFC 6455 §5.2 opcodes. 0x3–0x7 and 0xB–0xF are reserved and rejected.
public enum WebSocketOpcode: UInt8, Sendable {
    case continuation = 0x0
    case text = 0x1
    case binary = 0x2
    case close = 0x8
    case ping = 0x9
    case pong = 0xA

    /// §5.5: control frames have the high bit of the opcode set.
    public var isControl: Bool { rawValue & 0x8 != 0 }
}

/// One WebSocket frame (RFC 6455 §5.2):
///
///      0                   1                   2                   3
///      0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
///     +-+-+-+-+-------+-+-------------+-------------------------------+
///     |F|R|R|R| opcode|M| Payload len |    Extended payload length    |
///     |I|S|S|S|  (4)  |A|     (7)     |             (16/64)           |
///     |N|V|V|V|       |S|             |   (if payload len==126/127)   |
///     | |1|2|3|       |K|             |                               |
///     +-+-+-+-+-------+-+-------------+ - - - - - - - - - - - - - - - +
///     |     Extended payload length continued, if payload len == 127  |
///     + - - - - - - - - - - - - - - - +-------------------------------+
///     |                               |Masking-key, if MASK set to 1  |
///     +-------------------------------+-------------------------------+
///     | Masking-key (continued)       |          Payload Data         |
///     +-------------------------------- - - - - - - - - - - - - - - - +
///
/// `payload` is always the unmasked application data.
public struct WebSocketFrame: Sendable, Equatable {
    public var fin: Bool
    public var opcode: WebSocketOpcode
    public var payload: [UInt8]

    public init(fin: Bool = true, opcode: WebSocketOpcode, payload: [UInt8]) {
        self.fin = fin; self.opcode = opcode; self.payload = payload
    }

    /// §5.5: a control frame carries at most 125 bytes.
    public static let maxControlPayload = 125

    /// Encodes the frame; `mask` is the 4-byte masking key a client must use
    /// (§5.3), nil for an unmasked (server) frame. Lengths use the minimal
    /// form (§5.2: 7 bits up to 125, then 16, then 64).
    public func encode(mask: [UInt8]?) -> [UInt8] {
        precondition(mask == nil || mask!.count == 4, "a masking key is 4 bytes")
        var w = ByteWriter(capacity: payload.count + 14)
        w.u8((fin ? 0x80 : 0) | opcode.rawValue)
        let m: UInt8 = mask == nil ? 0 : 0x80
        if payload.count <= 125 {
            w.u8(m | UInt8(payload.count))
        } else if payload.count <= 0xffff {
            w.u8(m | 126); w.u16(UInt16(payload.count))
        } else {
            w.u8(m | 127); w.u64(UInt64(payload.count))
        }
        if let key = mask {
            w.append(key)
            var masked = payload
            for i in masked.indices { masked[i] ^= key[i & 3] }
            w.append(masked)
        } else {
            w.append(payload)
        }
        return w.bytes
    }

    /// What the parser expects of masking: a client receives unmasked frames
    /// and must fail on a masked one; a server the opposite (§5.1).
    public enum Peer: Sendable { case client, server }

    /// Parses one frame from the front of `buffer`. Returns nil when more
    /// bytes are needed, else the frame and the number of bytes it used.
    /// `maxPayload` bounds the declared length before anything is buffered.
    public static func parse(_ buffer: ArraySlice<UInt8>, receiver: Peer, maxPayload: Int) throws -> (WebSocketFrame, Int)? {
        let b = buffer
        let s = b.startIndex
        guard b.count >= 2 else { return nil }
        let b0 = b[s], b1 = b[s + 1]
        // §5.2: RSV1-3 must be 0 unless an extension was negotiated; castd negotiates none.
        guard b0 & 0x70 == 0 else { throw CastError(.websocketProtocol, "WebSocket frame has reserved bits set (RFC 6455 §5.2).") }
        guard let opcode = WebSocketOpcode(rawValue: b0 & 0x0f) else {
            throw CastError(.websocketProtocol, "WebSocket frame uses reserved opcode 0x\(String(b0 & 0x0f, radix: 16)) (RFC 6455 §5.2).")
        }
        let fin = b0 & 0x80 != 0
        let masked = b1 & 0x80 != 0
        switch (receiver, masked) {
        case (.client, true): throw CastError(.websocketProtocol, "The server sent a masked WebSocket frame (RFC 6455 §5.1).")
        case (.server, false): throw CastError(.websocketProtocol, "The client sent an unmasked WebSocket frame (RFC 6455 §5.1).")
        default: break
        }
        var header = 2
        var length = UInt64(b1 & 0x7f)
        if length == 126 {
            guard b.count >= 4 else { return nil }
            length = UInt64(b[s + 2]) << 8 | UInt64(b[s + 3])
            header = 4
            guard length >= 126 else { throw CastError(.websocketProtocol, "WebSocket length not in minimal form (RFC 6455 §5.2).") }
        } else if length == 127 {
            guard b.count >= 10 else { return nil }
            length = 0
            for i in 0..<8 { length = length << 8 | UInt64(b[s + 2 + i]) }
            header = 10
            // §5.2: the most significant bit MUST be 0.
            guard length >> 63 == 0 else { throw CastError(.websocketProtocol, "WebSocket 64-bit length has its top bit set (RFC 6455 §5.2).") }
            guard length > 0xffff else { throw CastError(.websocketProtocol, "WebSocket length not in minimal form (RFC 6455 §5.2).") }
        }
        if opcode.isControl {
            // §5.5: control frames are not fragmented and carry at most 125 bytes.
            guard fin else { throw CastError(.websocketProtocol, "Fragmented WebSocket control frame (RFC 6455 §5.5).") }
            guard length <= UInt64(maxControlPayload) else { throw CastError(.websocketProtocol, "WebSocket control frame over 125 bytes (RFC 6455 §5.5).") }
        }
        guard length <= UInt64(maxPayload) else {
            throw CastError(.websocketTooBig, "WebSocket frame of \(length) bytes is over the limit of \(maxPayload).")
        }
        let n = Int(length)
        let keyLength = masked ? 4 : 0
        guard b.count >= header + keyLength + n else { return nil }
        var payload = Array(b[(s + header + keyLength)..<(s + header + keyLength + n)])
        if masked {
            let k = Array(b[(s + header)..<(s + header + 4)])
            for i in payload.indices { payload[i] ^= k[i & 3] }
        }
        return (WebSocketFrame(fin: fin, opcode: opcode, payload: payload), header + keyLength + n)
    }
}

/// Close status codes (RFC 6455 §7.4).
public enum WebSocketCloseCode {
    public static let normal: UInt16 = 1000
    public static let goingAway: UInt16 = 1001
    public static let protocolError: UInt16 = 1002
    public static let unsupportedData: UInt16 = 1003
    /// Never on the wire: "no status received" (§7.4.1).
    public static let noStatus: UInt16 = 1005
    /// Never on the wire: the connection dropped without a close frame (§7.4.1).
    public static let abnormal: UInt16 = 1006
    public static let invalidPayload: UInt16 = 1007
    public static let policyViolation: UInt16 = 1008
    public static let messageTooBig: UInt16 = 1009
    public static let internalError: UInt16 = 1011

    /// Codes allowed in a close frame: 1000–1003, 1007–1014 (1012–1014 added
    /// to the IANA registry after the RFC), and 3000–4999 (§7.4.2). 1004,
    /// 1005, 1006 and 1015 are reserved and must never be sent (§7.4.1).
    public static func isValidOnWire(_ code: UInt16) -> Bool {
        switch code {
        case 1000...1003, 1007...1014, 3000...4999: return true
        default: return false
        }
    }

    /// The body of a close frame (§5.5.1): a 2-byte code then a UTF-8 reason.
    public static func body(code: UInt16, reason: String) -> [UInt8] {
        var w = ByteWriter()
        w.u16(code)
        // The whole control payload is at most 125 bytes: cut the reason on a character boundary.
        var r = Array(reason.utf8)
        if r.count > 123 {
            var cut = 123
            while cut > 0 && r[cut] & 0xC0 == 0x80 { cut -= 1 }
            r = Array(r[..<cut])
        }
        w.append(r)
        return w.bytes
    }

    /// Parses a close body: empty means "no status" (1005); one byte, an
    /// invalid code or a reason that is not UTF-8 is a protocol error.
    public static func parse(_ body: [UInt8]) throws -> (code: UInt16, reason: String) {
        if body.isEmpty { return (noStatus, "") }
        guard body.count >= 2 else { throw CastError(.websocketProtocol, "WebSocket close frame with a 1-byte body (RFC 6455 §5.5.1).") }
        let code = UInt16(body[0]) << 8 | UInt16(body[1])
        guard isValidOnWire(code) else { throw CastError(.websocketProtocol, "WebSocket close frame with invalid code \(code) (RFC 6455 §7.4).") }
        guard let reason = String(validating: body[2...], as: UTF8.self) else {
            throw CastError(.websocketProtocol, "WebSocket close reason is not UTF-8 (RFC 6455 §5.5.1).")
        }
        return (code, reason)
    }
}
