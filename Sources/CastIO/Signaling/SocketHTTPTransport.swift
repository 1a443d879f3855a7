import CastCore
import CastSignaling
import CastOpenSSL
import CastSystem
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// HTTP/1.1 over castd's own `TCPStream`/`TLSStream` (CastOpenSSL), one
/// connection per request (`Connection: close`): castd's only HTTP client
/// (`trust: .system` normally, `.systemAnd(anchor)` with a development trust
/// anchor). Verification is the same as for `wss://`: chain to `trust`, host
/// name or IP, TLS ≥ 1.2. It replaced URLSession (issue 19), which linked
/// FoundationNetworking and libcurl and could not take an extra anchor.
public final class SocketHTTPTransport: HTTPTransport, Sendable {
    public let trust: SSLEngine.Trust
    private let maxBody: Int

    public init(trust: SSLEngine.Trust, maxBody: Int = HTTPResponseParser.defaultMaxBody) {
        self.trust = trust
        self.maxBody = maxBody
    }

    public func send(method: String, url: URL, headers: [String: String], body: [UInt8]?, timeout: Duration) async throws -> HTTPResponse {
        let trust = self.trust, maxBody = self.maxBody
        // Blocking socket IO on its own thread, never on the cooperative pool.
        return try await withCheckedThrowingContinuation { cont in
            SystemThread.start(name: "castd-http") {
                cont.resume(with: Result {
                    try Self.exchange(method: method, url: url, headers: headers, body: body, timeout: timeout,
                                      trust: trust, maxBody: maxBody)
                })
            }
        }
    }

    /// The request's bytes: request line, Host, the given headers, Content-Length, body.
    /// Header names and values with CR, LF or NUL are refused (no header injection).
    public static func request(method: String, target: WebSocketClient.Target, headers: [String: String],
                               body: [UInt8]?) throws -> [UInt8] {
        func clean(_ s: String) -> Bool { !s.utf8.contains { $0 == 13 || $0 == 10 || $0 == 0 } }
        guard !method.isEmpty, method.utf8.allSatisfy({ $0 >= 0x41 && $0 <= 0x5a }) else {
            throw CastError(.usage, "Not an HTTP method: \(method.prefix(20))")
        }
        var s = "\(method) \(target.pathAndQuery) HTTP/1.1\r\nHost: \(target.hostHeader)\r\n"
        for (k, v) in headers.sorted(by: { $0.key < $1.key }) {
            let lower = k.lowercased()
            if lower == "host" || lower == "content-length" || lower == "connection" || lower == "accept-encoding" { continue }
            guard !k.isEmpty, clean(k), clean(v), !k.contains(":") else {
                throw CastError(.usage, "An HTTP header (\(k.prefix(40))) has a character not allowed there.")
            }
            s += "\(k): \(v)\r\n"
        }
        if let body { s += "Content-Length: \(body.count)\r\n" }
        s += "Accept-Encoding: identity\r\nConnection: close\r\n\r\n"
        return Array(s.utf8) + (body ?? [])
    }

    static func exchange(method: String, url: URL, headers: [String: String], body: [UInt8]?, timeout: Duration,
                         trust: SSLEngine.Trust, maxBody: Int) throws -> HTTPResponse {
        let target = try WebSocketClient.Target(url: url.absoluteString)
        let host = AddressRedaction.redact(target.host)
        let clock = SystemMonotonicClock()
        let end = clock.now() + timeout
        let what = "HTTP \(method) \(url.path) to \(host)"
        func failed(_ e: Error) -> CastError {
            let c = e as? CastError ?? CastError(.network, "\(e)")
            return CastError(c.code, "\(what) failed: \(c.message)")
        }
        let stream: ByteStream
        do {
            stream = target.secure
                ? try TLSStream.connect(host: target.host, port: target.port, timeout: timeout, trust: trust)
                : try TCPStream.connect(host: target.host, port: target.port, timeout: timeout)
        } catch { throw failed(error) }
        defer { stream.close() }
        var parser = HTTPResponseParser(requestMethod: method, maxBody: maxBody)
        do {
            try stream.write(try request(method: method, target: target, headers: headers, body: body))
            while true {
                let left = end - clock.now()
                guard left > .zero else { throw CastError(.timeout, "timed out") }
                var p = pollfd(fd: stream.fileDescriptor, events: Int16(POLLIN), revents: 0)
                let n = poll(&p, 1, Int32(clamping: max(1, left.totalNanoseconds / 1_000_000)))
                if n < 0 && errno != EINTR { throw sysError("poll") }
                guard n > 0, let bytes = try stream.readAvailable() else { continue }
                if bytes.isEmpty { return try parser.finish() }
                if let r = try parser.feed(bytes) { return r }
                // close_notify may come with the last bytes while the socket stays open.
                if let tls = stream as? TLSStream, tls.closedByPeer { return try parser.finish() }
            }
        } catch { throw failed(error) }
    }
}
