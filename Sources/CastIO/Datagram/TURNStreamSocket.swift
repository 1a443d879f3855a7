import CastCore
import CastOpenSSL
import CastSystem
import CastWebRTC

#if canImport(Glibc)
import Glibc
#endif

/// A TURN server's TCP or TLS connection (RFC 8656 §3.1) as one more socket of a
/// `DatagramDriver`: a non-blocking connect, TLS through CastOpenSSL's `SSLEngine` (memory
/// BIOs, the same engine `wss://` uses, so `--dev-trust-certificate` applies), and the
/// driver's own poll loop: no thread of its own.
///
/// To the core it looks like a socket bound to `local` that talks only to `server`: what
/// the core sends to the server is written to the stream (held until the connection, and
/// TLS, are up), and what the server sends comes back in slices "from" the server (the
/// TURN client frames them, RFC 8656 §12.5). When the connection fails or ends,
/// `closeReason` says why and the driver tells the core once.
///
/// Back-pressure: at most `maxBuffered` bytes wait for the kernel; beyond that a whole
/// message is refused (`send` answers false), so the stream's framing stays intact and
/// no queue grows without bound (docs/architecture.md: drop, never queue).
public final class TURNStreamSocket: DatagramSocket, @unchecked Sendable {
    // Used only by the driver's thread after creation.
    public let fd: Int32
    public let local: SocketAddress
    public let server: SocketAddress
    /// 1 MiB: a second of a 4 Mbit/s cast and then some.
    static let maxBuffered = 1 << 20

    private enum State { case connecting, handshaking, open, closed }
    private var state = State.connecting
    private let tls: SSLEngine?
    private let clock = SystemMonotonicClock()
    /// Wire bytes the kernel has not taken yet; `written` of them already went.
    private var outgoing: [UInt8] = []
    private var written = 0
    /// Application bytes sent before the TLS handshake finished.
    private var held: [[UInt8]] = []
    private var heldBytes = 0
    /// Bytes from the server; the driver has read the first `inboxRead`.
    private var inbox: [UInt8] = []
    private var inboxRead = 0
    public private(set) var closeReason: String? = nil

    /// Starts connecting to `server` (TLS when `tlsHost` is given: the certificate must name
    /// it and chain to `trust`). The kernel picks the local port; one that equals an address
    /// in `avoiding` (a UDP socket of the same driver: the driver tells sockets apart by
    /// address) is given back and another is taken. Throws when no connection can even start
    /// (no route, no descriptors).
    public init(server: SocketAddress, tlsHost: String?, trust: SSLEngine.Trust, avoiding: [SocketAddress]) throws {
        self.server = server
        tls = try tlsHost.map { try SSLEngine(tlsClientFor: $0, trust: trust) }
        var attempt = 0
        while true {
            attempt += 1
            let (fd, local) = try Self.startConnect(to: server)
            if avoiding.contains(local) && attempt < 8 {
                Glibc.close(fd)
                continue
            }
            self.fd = fd
            self.local = local
            break
        }
    }

    deinit { Glibc.close(fd) }

    private static func startConnect(to server: SocketAddress) throws -> (Int32, SocketAddress) {
        let family = server.ip.isIPv6 ? AF_INET6 : AF_INET
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw CastError.posix("socket") }
        var one: Int32 = 1
        // Small TURN messages (checks, consent) must not wait for Nagle.
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var storage = sockaddr_storage()
        let len = UDPSocket.fill(&storage, server)
        let r = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, len) }
        }
        guard r == 0 || errno == EINPROGRESS else {
            let e = CastError.posix("connect")
            Glibc.close(fd)
            throw e
        }
        var bound = sockaddr_storage()
        var blen = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &blen) }
        }
        guard let local = UDPSocket.address(of: bound) else {
            Glibc.close(fd)
            throw CastError(.io, "connect: the kernel gave the TCP socket no local address")
        }
        return (fd, local)
    }

    // MARK: DatagramSocket

    public var pollEvents: Int16 {
        switch state {
        case .connecting: return Int16(POLLOUT)
        case .closed: return 0
        case .handshaking, .open: return Int16(POLLIN) | (written < outgoing.count ? Int16(POLLOUT) : 0)
        }
    }

    public func ready(_ revents: Int16) {
        if state == .connecting {
            guard revents & Int16(POLLOUT | POLLERR | POLLHUP) != 0 else { return }
            var err: Int32 = 0
            var len = socklen_t(MemoryLayout<Int32>.size)
            _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len)
            guard err == 0 else { return close("could not be made (\(String(cString: strerror(err))))") }
            if let tls {
                state = .handshaking
                tls.start(now: clock.now())
                takeTLSOutput()
            } else {
                state = .open
            }
        }
        if revents & Int16(POLLIN | POLLERR | POLLHUP) != 0 { readAll() }
        flush()
    }

    /// Queues one message for the server; false when it is refused whole (closed, or the
    /// connection is `maxBuffered` behind).
    @discardableResult
    public func send(_ bytes: [UInt8], to address: SocketAddress) -> Bool {
        guard state != .closed, address == server else { return false }
        guard outgoing.count - written + heldBytes + bytes.count <= Self.maxBuffered else { return false }
        if let tls {
            guard state == .open else {
                held.append(bytes)
                heldBytes += bytes.count
                return true
            }
            do { try tls.writeApplication(bytes) } catch {
                close("failed (TLS: \((error as? CastError)?.message ?? "\(error)"))")
                return false
            }
            takeTLSOutput()
        } else {
            outgoing += bytes
        }
        flush()
        return true
    }

    public func receive(into buffer: inout [UInt8]) -> (count: Int, from: SocketAddress)? {
        guard inboxRead < inbox.count, !buffer.isEmpty else { return nil }
        let n = min(buffer.count, inbox.count - inboxRead)
        buffer.replaceSubrange(0..<n, with: inbox[inboxRead..<inboxRead + n])
        inboxRead += n
        if inboxRead == inbox.count { inbox.removeAll(keepingCapacity: true); inboxRead = 0 }
        return (n, server)
    }

    // MARK: Internals

    private func readAll() {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while state != .closed {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n > 0 {
                received(Array(chunk[0..<n]))
                continue
            }
            if n == 0 { return close(state == .handshaking ? "was closed by the server during the TLS handshake" : "was closed by the server") }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { return }
            return close("failed (\(String(cString: strerror(errno))))")
        }
    }

    private func received(_ bytes: [UInt8]) {
        guard let tls else { inbox += bytes; return }
        tls.feed(bytes, now: clock.now())
        takeTLSOutput()
        while let plain = tls.readApplication() { inbox += plain }
        switch tls.state {
        case .connected where state == .handshaking:
            state = .open
            let pending = held
            held.removeAll()
            heldBytes = 0
            for m in pending {
                do { try tls.writeApplication(m) } catch {
                    return close("failed (TLS: \((error as? CastError)?.message ?? "\(error)"))")
                }
            }
            takeTLSOutput()
        case .failed(let e):
            close(state == .handshaking ? "failed the TLS handshake (\(e.message))" : "failed (TLS: \(e.message))")
        case .closed:
            close("was closed by the server (TLS close_notify)")
        default:
            break
        }
    }

    private func takeTLSOutput() {
        while let out = tls?.pollOutgoing() { outgoing += out }
    }

    private func flush() {
        while state != .closed, state != .connecting, written < outgoing.count {
            let n = outgoing[written...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
            if n > 0 { written += n; continue }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { break }
            close("failed (\(String(cString: strerror(errno))))")
        }
        if written > 0, written == outgoing.count || written >= 65_536 {
            outgoing.removeFirst(written)
            written = 0
        }
    }

    /// `reason` completes "the TCP connection …" in the TURN client's sentence.
    private func close(_ reason: String) {
        guard state != .closed else { return }
        state = .closed
        closeReason = reason
        // The descriptor stays open (and unpolled) until deinit, so its number is not reused
        // while the driver may still hold it.
        shutdown(fd, Int32(SHUT_RDWR))
    }
}
