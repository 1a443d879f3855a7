import CastCore
import CastSignaling
import CastOpenSSL
import CastSystem
import FoundationEssentials
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What a `WebSocketClient` reports, in order, on `events`.
public enum WebSocketEvent: Sendable, Equatable {
    case open
    case text(String)
    case binary([UInt8])
    /// The last event. `error` is nil for a clean close.
    case closed(code: UInt16, reason: String, error: CastError?)
}

/// A WebSocket client over a `ByteStream` (RFC 6455; Foundation's WebSocket
/// task cannot be used: Debian's libcurl lacks WebSocket). One thread owns
/// the socket and the `WebSocketConnection`; other threads only enqueue
/// sends and wake it through a pipe.
public final class WebSocketClient: Sendable {
    public struct Target: Sendable, Equatable {
        public var secure: Bool
        public var host: String
        public var port: UInt16
        public var pathAndQuery: String

        public init(secure: Bool, host: String, port: UInt16, pathAndQuery: String) {
            self.secure = secure; self.host = host; self.port = port; self.pathAndQuery = pathAndQuery
        }

        /// Parses `ws://` and `wss://` URLs (`http(s)://` map to them): scheme, host (a
        /// name, IPv4, or IPv6 in brackets), optional port, path and query; user
        /// info and fragment are dropped. ASCII only. By hand, not with URLComponents,
        /// whose host getter pages in ICU's IDNA data (issue 7: castd's memory).
        public init(url: String) throws {
            let bad = CastError(.usage, "Not a WebSocket URL: \(url.prefix(80))")
            guard url.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }), let sep = url.firstRange(of: "://") else { throw bad }
            let scheme = url[..<sep.lowerBound].lowercased()
            switch scheme {
            case "ws", "http": secure = false
            case "wss", "https": secure = true
            default: throw CastError(.usage, "Not a WebSocket URL scheme: \(scheme.prefix(20))")
            }
            var rest = url[sep.upperBound...]
            if let hash = rest.firstIndex(of: "#") { rest = rest[..<hash] }
            let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
            var authority = rest[..<authorityEnd]
            if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
            var portText: Substring? = nil
            if authority.hasPrefix("[") {
                guard let close = authority.firstIndex(of: "]") else { throw bad }
                host = String(authority[authority.index(after: authority.startIndex)..<close])
                let after = authority[authority.index(after: close)...]
                if !after.isEmpty {
                    guard after.hasPrefix(":") else { throw bad }
                    portText = after.dropFirst()
                }
            } else if let colon = authority.firstIndex(of: ":") {
                host = String(authority[..<colon])
                portText = authority[authority.index(after: colon)...]
            } else {
                host = String(authority)
            }
            guard !host.isEmpty else { throw bad }
            if let portText {
                guard !portText.isEmpty, portText.allSatisfy(\.isASCII), portText.allSatisfy(\.isNumber),
                      let p = UInt16(portText), p > 0 else { throw bad }
                port = p
            } else {
                port = secure ? 443 : 80
            }
            let tail = rest[authorityEnd...]
            pathAndQuery = tail.hasPrefix("/") ? String(tail) : "/" + tail
        }

        var hostHeader: String {
            let h = host.contains(":") ? "[\(host)]" : host
            return (secure && port == 443) || (!secure && port == 80) ? h : "\(h):\(port)"
        }
    }

    public let events: AsyncStream<WebSocketEvent>
    private let continuation: AsyncStream<WebSocketEvent>.Continuation
    private let outbox = Mutex<(items: [Outgoing], closing: Bool)>(([], false))
    /// The self-pipe: read end, write end, both non-blocking.
    private let wakeFDs: (Int32, Int32)

    enum Outgoing: Sendable { case text(String), close(UInt16) }

    /// Opens a stream for a target; the default is TCP, and TLS when the TLS engine lands.
    public typealias Connector = @Sendable (Target, Duration) throws -> ByteStream

    /// TCP for `ws://`; TLS (system CA store, hostname verification, SNI) for `wss://`.
    public static let defaultConnector: Connector = connector(trust: .system)

    /// TCP for `ws://`; TLS verified against `trust` (hostname verification, SNI) for `wss://`.
    public static func connector(trust: SSLEngine.Trust) -> Connector {
        { target, timeout in
            target.secure
                ? try TLSStream.connect(host: target.host, port: target.port, timeout: timeout, trust: trust)
                : try TCPStream.connect(host: target.host, port: target.port, timeout: timeout)
        }
    }

    /// Starts connecting at once on its own thread.
    public init(url: String, limits: WebSocketConnection.Limits = .init(), connectTimeout: Duration = .seconds(10),
                connector: @escaping Connector = WebSocketClient.defaultConnector) throws {
        let target = try Target(url: url)
        (events, continuation) = AsyncStream.makeStream(of: WebSocketEvent.self)
        var p: [Int32] = [-1, -1]
        guard pipe(&p) == 0 else { throw sysError("create a pipe") }
        for fd in p {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        wakeFDs = (p[0], p[1])
        let box = UncheckedBox(self)
        SystemThread.start(name: "castd-websocket") {
            box.value.run(target: target, limits: limits, connectTimeout: connectTimeout, connector: connector)
        }
    }

    deinit { Glibc.close(wakeFDs.0); Glibc.close(wakeFDs.1) }

    public func send(text: String) {
        outbox.withLock { $0.items.append(.text(text)) }
        wake()
    }

    /// Starts the closing handshake; `.closed` follows on `events`.
    public func close(code: UInt16 = WebSocketCloseCode.normal) {
        outbox.withLock { $0.items.append(.close(code)) }
        wake()
    }

    private func wake() {
        var one: UInt8 = 1
        _ = Glibc.write(wakeFDs.1, &one, 1)   // a full pipe already means awake
    }

    // Swift 6.3.1 crashes in -O (SIL CopyPropagation "Found ownership error") on
    // this function; it is IO-bound, so it is compiled unoptimised.
    @_optimize(none)
    private func run(target: Target, limits: WebSocketConnection.Limits, connectTimeout: Duration, connector: Connector) {
        let clock = SystemMonotonicClock()
        let stream: ByteStream
        do { stream = try connector(target, connectTimeout) } catch {
            let e = error as? CastError ?? CastError(.network, "\(error)")
            continuation.yield(.closed(code: WebSocketCloseCode.abnormal, reason: "", error: e))
            continuation.finish()
            return
        }
        defer { stream.close(); continuation.finish() }
        let hs = WebSocketHandshake(hostHeader: target.hostHeader, path: target.pathAndQuery, nonce: SecureRandom.bytes(16))
        var conn = WebSocketConnection(handshake: hs, limits: limits, maskSource: { SecureRandom.bytes(4) })
        let openBy = clock.now() + connectTimeout
        do {
            _ = try drain(&conn, to: stream, strictWrites: true)   // the upgrade request
            while true {
                let now = clock.now()
                // Until the upgrade is answered, the shell's own limit (the connect timeout).
                let upgrading = !conn.isOpen && conn.nextDeadline() == nil
                let deadline = upgrading ? openBy : conn.nextDeadline()
                if let d = deadline, now >= d {
                    if upgrading {
                        continuation.yield(.closed(code: WebSocketCloseCode.abnormal, reason: "",
                                                   error: CastError(.timeout, "The WebSocket upgrade got no answer within \(connectTimeout).")))
                        return
                    }
                    conn.handleTimeout(now: now)
                    if try drain(&conn, to: stream, strictWrites: false) { return }
                    continue
                }
                let ms: Int32 = deadline.map { Int32(clamping: max(1, ($0 - now).totalNanoseconds / 1_000_000)) } ?? -1
                var fds = [pollfd(fd: stream.fileDescriptor, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: wakeFDs.0, events: Int16(POLLIN), revents: 0)]
                let n = poll(&fds, 2, ms)
                if n < 0 && errno != EINTR { throw sysError("poll") }
                if fds[1].revents != 0 {
                    var drain = [UInt8](repeating: 0, count: 64)
                    while Glibc.read(wakeFDs.0, &drain, drain.count) > 0 {}
                    let items = outbox.withLock { box -> [Outgoing] in defer { box.items = [] }; return box.items }
                    for item in items {
                        switch item {
                        case .text(let t): conn.handle(.text(t), now: clock.now())   // dropped unless open
                        case .close(let code): conn.handle(.close(code: code, reason: ""), now: clock.now())
                        }
                        if try self.drain(&conn, to: stream, strictWrites: true) { return }
                    }
                }
                if fds[0].revents != 0 {
                    guard let data = try stream.readAvailable() else { continue }
                    conn.handle(data.isEmpty ? .connectionLost : .bytes(data), now: clock.now())
                    if try drain(&conn, to: stream, strictWrites: false) { return }
                }
            }
        } catch {
            let e = error as? CastError ?? CastError(.network, "\(error)")
            continuation.yield(.closed(code: WebSocketCloseCode.abnormal, reason: "", error: e))
        }
    }

    /// Carries out the connection's outputs until it answers nil; true once it is over. A write
    /// the owner asked for (the upgrade, a message, our close) that fails ends the connection
    /// with that error; one the protocol answered by itself (a pong, an echoed or failing close)
    /// is not checked, and the read that follows finds a dead socket.
    private func drain(_ conn: inout WebSocketConnection, to stream: ByteStream, strictWrites: Bool) throws -> Bool {
        while let o = conn.poll() {
            switch o {
            case .write(let b): if strictWrites { try stream.write(b) } else { try? stream.write(b) }
            case .opened: continuation.yield(.open)
            case .text(let t): continuation.yield(.text(t))
            case .binary(let b): continuation.yield(.binary(b))
            case .pong: break
            case .closed(let code, let reason, let error):
                continuation.yield(.closed(code: code, reason: reason, error: error))
                return true
            }
        }
        return false
    }
}

/// Hands a reference to the thread that owns it.
struct UncheckedBox<T>: @unchecked Sendable { let value: T; init(_ v: T) { value = v } }
