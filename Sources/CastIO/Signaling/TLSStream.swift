import CastCore
import CastSignaling
import CastOpenSSL
import CastSystem
#if canImport(Glibc)
import Glibc
#endif

/// TLS over a `TCPStream` for `wss://` (issue 3 item 2): CastOpenSSL's
/// `SSLEngine` (TLS ≥ 1.2, the system CA store or given anchors, hostname or
/// IP verification, SNI for names) driven over the socket. The handshake
/// completes in `connect`, so the WebSocket thread sees a plain byte stream.
public final class TLSStream: ByteStream {
    private let tcp: TCPStream
    private let engine: SSLEngine
    private let clock = SystemMonotonicClock()

    public var fileDescriptor: Int32 { tcp.fileDescriptor }

    /// The server sent close_notify: no more data will come, even if the socket stays open.
    public var closedByPeer: Bool { engine.state == .closed }

    init(tcp: TCPStream, engine: SSLEngine) {
        self.tcp = tcp
        self.engine = engine
    }

    public static func connect(host: String, port: UInt16, timeout: Duration, trust: SSLEngine.Trust = .system) throws -> TLSStream {
        let tcp = try TCPStream.connect(host: host, port: port, timeout: timeout)
        let s = TLSStream(tcp: tcp, engine: try SSLEngine(tlsClientFor: host, trust: trust))
        let clock = SystemMonotonicClock()
        let end = clock.now() + timeout
        s.engine.start(now: clock.now())
        try s.flush()
        while true {
            switch s.engine.state {
            case .connected: return s
            case .failed(let e): throw CastError(e.code, "TLS to \(AddressRedaction.redact(host)):\(port): \(e.message)")
            case .closed: throw CastError(.network, "TLS to \(AddressRedaction.redact(host)):\(port) closed during the handshake.")
            case .idle, .handshaking: break
            }
            let left = end - clock.now()
            guard left > .zero else { throw CastError(.timeout, "TLS handshake with \(AddressRedaction.redact(host)):\(port) timed out.") }
            var p = pollfd(fd: tcp.fileDescriptor, events: Int16(POLLIN), revents: 0)
            let n = poll(&p, 1, Int32(clamping: max(1, left.totalNanoseconds / 1_000_000)))
            if n < 0 && errno != EINTR { throw sysError("poll") }
            guard n > 0 else { continue }
            guard let raw = try tcp.readAvailable() else { continue }
            if raw.isEmpty { throw CastError(.network, "TLS to \(AddressRedaction.redact(host)):\(port): the server closed the connection during the handshake.") }
            s.engine.feed(raw, now: clock.now())
            try s.flush()
        }
    }

    /// Writes whatever the engine has produced (handshake, records, alerts).
    private func flush() throws {
        while let out = engine.pollOutgoing() { try tcp.write(out) }
    }

    public func readAvailable() throws -> [UInt8]? {
        guard let raw = try tcp.readAvailable() else { return nil }
        if raw.isEmpty { return [] }
        engine.feed(raw, now: clock.now())
        try flush()
        var plain: [UInt8] = []
        while let chunk = engine.readApplication() { plain += chunk }
        if !plain.isEmpty { return plain }
        switch engine.state {
        case .failed(let e): throw CastError(e.code, "TLS: \(e.message)")
        case .closed: return []      // close_notify: end of stream
        default: return nil          // a partial record: wait for more
        }
    }

    public func write(_ bytes: [UInt8]) throws {
        try engine.writeApplication(bytes)
        try flush()
    }

    public func close() {
        engine.close()
        try? flush()
        tcp.close()
    }
}
