import CastCore
import CastSignaling
import CastSystem
#if canImport(Glibc)
import Glibc
#endif

/// A connected byte stream the WebSocket thread polls and reads: `TCPStream`
/// for `ws://`, `TLSStream` (TCP + CastOpenSSL's TLS engine) for `wss://`.
public protocol ByteStream: AnyObject {
    /// The descriptor to poll for readability.
    var fileDescriptor: Int32 { get }
    /// Bytes available now: nil if none yet (would block), empty at end of stream.
    func readAvailable() throws -> [UInt8]?
    /// Writes everything (waits for the socket to drain as needed).
    func write(_ bytes: [UInt8]) throws
    func close()
}

/// A TCP connection over a POSIX socket, non-blocking once connected.
public final class TCPStream: ByteStream {
    public let fileDescriptor: Int32
    private var closed = false

    init(fd: Int32) { fileDescriptor = fd }
    deinit { close() }

    /// Resolves `host` and connects to the first address that answers within `timeout`.
    public static func connect(host: String, port: UInt16, timeout: Duration) throws -> TCPStream {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var res: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &res)
        guard rc == 0, let first = res else {
            throw CastError(.network, "Cannot resolve \(AddressRedaction.redact(host)): \(String(cString: gai_strerror(rc))).")
        }
        defer { freeaddrinfo(res) }
        var lastError = CastError(.network, "No address for \(AddressRedaction.redact(host)).")
        var ai: UnsafeMutablePointer<addrinfo>? = first
        while let a = ai {
            ai = a.pointee.ai_next
            let fd = socket(a.pointee.ai_family, a.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), a.pointee.ai_protocol)
            if fd < 0 { lastError = sysError("socket"); continue }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            if Glibc.connect(fd, a.pointee.ai_addr, a.pointee.ai_addrlen) == 0 { return TCPStream(fd: fd) }
            guard errno == EINPROGRESS else {
                lastError = CastError.posix(.network) { "Cannot connect to \(AddressRedaction.redact(host)):\(port): \($0)." }
                Glibc.close(fd); continue
            }
            var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            let ms = Int32(clamping: timeout.totalNanoseconds / 1_000_000)
            let n = poll(&p, 1, ms)
            var soErr: Int32 = 0
            var len = socklen_t(MemoryLayout<Int32>.size)
            _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &soErr, &len)
            if n == 1 && soErr == 0 { return TCPStream(fd: fd) }
            lastError = n == 0
                ? CastError(.timeout, "Connecting to \(AddressRedaction.redact(host)):\(port) timed out.")
                : CastError.posix(.network, errno: soErr) { "Cannot connect to \(AddressRedaction.redact(host)):\(port): \($0)." }
            Glibc.close(fd)
        }
        throw lastError
    }

    public func readAvailable() throws -> [UInt8]? {
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = recv(fileDescriptor, &buf, buf.count, 0)
            if n > 0 { return Array(buf[0..<n]) }
            if n == 0 { return [] }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { return nil }
            throw sysError("read from socket")
        }
    }

    public func write(_ bytes: [UInt8]) throws {
        var off = 0
        while off < bytes.count {
            let n = bytes[off...].withUnsafeBytes { send(fileDescriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 { off += n; continue }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                var p = pollfd(fd: fileDescriptor, events: Int16(POLLOUT), revents: 0)
                if poll(&p, 1, 10_000) == 0 { throw CastError(.timeout, "The socket accepted no data for 10 s.") }
                continue
            }
            throw sysError("write to socket")
        }
    }

    public func close() {
        if !closed { closed = true; Glibc.close(fileDescriptor) }
    }
}

/// errno as "Could not <what>: <reason>." with the `.network` code (through `CastError.posix`).
func sysError(_ what: String) -> CastError {
    CastError.posix(.network) { "Could not \(what): \($0)." }
}
