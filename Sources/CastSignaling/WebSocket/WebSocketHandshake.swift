import CastCore
import CastOpenSSL
import FoundationEssentials

/// The opening handshake of a WebSocket client (RFC 6455 §4.1, §4.2.2).
public struct WebSocketHandshake: Sendable {
    /// §1.3: the GUID appended to the key before hashing.
    static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
    /// A response head larger than this is refused (not a WebSocket server).
    public static let maxResponseHead = 16 * 1024

    public let host: String
    public let path: String
    /// base64 of 16 random bytes (§4.1 item 7).
    public let key: String
    public var extraHeaders: [(String, String)]

    /// `hostHeader` is host[:port] as it goes in `Host` (§4.1 item 4).
    /// `path` includes the query. `nonce` must be 16 fresh random bytes.
    public init(hostHeader: String, path: String, nonce: [UInt8], extraHeaders: [(String, String)] = []) {
        precondition(nonce.count == 16, "Sec-WebSocket-Key is 16 random bytes")
        host = hostHeader
        self.path = path.isEmpty ? "/" : path
        key = Data(nonce).base64EncodedString()
        self.extraHeaders = extraHeaders
    }

    public var request: [UInt8] {
        var s = "GET \(path) HTTP/1.1\r\n"
        s += "Host: \(host)\r\n"
        s += "Upgrade: websocket\r\n"
        s += "Connection: Upgrade\r\n"
        s += "Sec-WebSocket-Key: \(key)\r\n"
        s += "Sec-WebSocket-Version: 13\r\n"
        for (k, v) in extraHeaders { s += "\(k): \(v)\r\n" }
        s += "\r\n"
        return Array(s.utf8)
    }

    /// §4.2.2 item 5.4: base64(SHA-1(key ++ GUID)).
    public static func acceptValue(forKey key: String) -> String {
        Data(Digest.sha1.hash(Array((key + guid).utf8))).base64EncodedString()
    }

    public var expectedAccept: String { Self.acceptValue(forKey: key) }

    /// Checks the server's response head. Returns nil until the blank line
    /// has arrived, else the number of bytes the head used (the rest are
    /// frames). Throws `.websocketHandshake` on anything but an upgrade.
    public func parseResponse(_ buffer: ArraySlice<UInt8>) throws -> Int? {
        guard let end = Self.headEnd(buffer) else {
            if buffer.count > Self.maxResponseHead {
                throw CastError(.websocketHandshake, "The server's answer to the WebSocket upgrade has no end of headers within \(Self.maxResponseHead) bytes.")
            }
            return nil
        }
        guard end <= Self.maxResponseHead else {
            throw CastError(.websocketHandshake, "The server's WebSocket upgrade headers exceed \(Self.maxResponseHead) bytes.")
        }
        let head = buffer[buffer.startIndex..<(buffer.startIndex + end - 4)]
        guard let text = String(validating: head, as: UTF8.self) else {
            throw CastError(.websocketHandshake, "The server's answer to the WebSocket upgrade is not text.")
        }
        let lines = text.split(separator: "\r\n" as Character, omittingEmptySubsequences: false)
        let status = lines[0].split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard status.count >= 2, status[0].hasPrefix("HTTP/1."), let code = Int(status[1]), status[1].count == 3 else {
            throw CastError(.websocketHandshake, "The server's answer to the WebSocket upgrade is not HTTP/1.1.")
        }
        guard code == 101 else {
            throw CastError(.websocketHandshake, "The server refused the WebSocket upgrade (HTTP \(code)\(status.count > 2 ? " \(Self.clip(String(status[2])))" : "")).")
        }
        var headers: [String: [String]] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else {
                throw CastError(.websocketHandshake, "Malformed header line in the WebSocket upgrade answer.")
            }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingWhitespace()
            headers[name, default: []].append(value)
        }
        // §4.1, client requirements 2–6.
        guard headers["upgrade"]?.contains(where: { $0.lowercased() == "websocket" }) == true else {
            throw CastError(.websocketHandshake, "The WebSocket upgrade answer lacks `Upgrade: websocket`.")
        }
        let connectionTokens = (headers["connection"] ?? []).flatMap { $0.split(separator: ",") }
            .map { $0.trimmingWhitespace().lowercased() }
        guard connectionTokens.contains("upgrade") else {
            throw CastError(.websocketHandshake, "The WebSocket upgrade answer lacks `Connection: Upgrade`.")
        }
        guard let accept = headers["sec-websocket-accept"], accept.count == 1, accept[0] == expectedAccept else {
            throw CastError(.websocketHandshake, "The server's Sec-WebSocket-Accept does not match the key castd sent (RFC 6455 §4.1).")
        }
        if let ext = headers["sec-websocket-extensions"], ext.contains(where: { !$0.isEmpty }) {
            throw CastError(.websocketHandshake, "The server chose a WebSocket extension castd did not offer.")
        }
        if let proto = headers["sec-websocket-protocol"], proto.contains(where: { !$0.isEmpty }) {
            throw CastError(.websocketHandshake, "The server chose a WebSocket subprotocol castd did not offer.")
        }
        return end
    }

    /// The offset just past `\r\n\r\n`, or nil.
    static func headEnd(_ b: ArraySlice<UInt8>) -> Int? {
        guard b.count >= 4 else { return nil }
        var i = b.startIndex
        while i + 3 < b.endIndex {
            if b[i] == 13 && b[i + 1] == 10 && b[i + 2] == 13 && b[i + 3] == 10 { return i + 4 - b.startIndex }
            i += 1
        }
        return nil
    }

    static func clip(_ s: String) -> String {
        let p = s.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7f }
        return String(String.UnicodeScalarView(p.prefix(80)))
    }
}
