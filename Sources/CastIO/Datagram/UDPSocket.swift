import CastCore
import CastSystem
import CastWebRTC

#if canImport(Glibc)
import Glibc
#endif

/// What a `DatagramDriver` polls and sends on: a non-blocking datagram socket
/// identified by the address it is bound to.
public protocol DatagramSocket: AnyObject, Sendable {
    var fd: Int32 { get }
    var local: SocketAddress { get }
    @discardableResult func send(_ bytes: [UInt8], to address: SocketAddress) -> Bool
    func receive(into buffer: inout [UInt8]) -> (count: Int, from: SocketAddress)?
    /// What the driver polls the descriptor for (a stream adds POLLOUT while it has bytes
    /// to write or is connecting; 0: do not poll it).
    var pollEvents: Int16 { get }
    /// Poll reported `revents` on the descriptor; called before `receive`.
    func ready(_ revents: Int16)
    /// Why a stream socket is over (nil while it lives; always nil for datagram sockets).
    var closeReason: String? { get }
}

extension DatagramSocket {
    public var pollEvents: Int16 { Int16(POLLIN) }
    public func ready(_ revents: Int16) {}
    public var closeReason: String? { nil }
}

/// A non-blocking UDP socket bound to one local address. Owns its descriptor
/// and closes it exactly once.
public final class UDPSocket: DatagramSocket, @unchecked Sendable {
    // Used only by the peer driver's thread after creation.
    public let fd: Int32
    public let local: SocketAddress

    public init(bindTo address: SocketAddress) throws {
        let family = address.ip.isIPv6 ? AF_INET6 : AF_INET
        let fd = socket(family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw CastError.posix("socket") }
        if family == AF_INET6 {
            var on: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &on, socklen_t(MemoryLayout<Int32>.size))
        }
        var storage = sockaddr_storage()
        let len = Self.fill(&storage, address)
        let r = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) }
        }
        guard r == 0 else {
            let e = CastError.posix("bind \(address)")
            close(fd)
            throw e
        }
        var bound = sockaddr_storage()
        var blen = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &blen) }
        }
        self.fd = fd
        self.local = Self.address(of: bound) ?? address
    }

    deinit { close(fd) }

    /// Sends one datagram; false when the kernel refused it (the caller counts it, ICE retries).
    @discardableResult
    public func send(_ bytes: [UInt8], to address: SocketAddress) -> Bool {
        Self.sendDatagram(fd: fd, bytes, to: address)
    }

    /// Receives one datagram if one is waiting.
    public func receive(into buffer: inout [UInt8]) -> (count: Int, from: SocketAddress)? {
        Self.receiveDatagram(fd: fd, into: &buffer)
    }

    static func sendDatagram(fd: Int32, _ bytes: [UInt8], to address: SocketAddress) -> Bool {
        var storage = sockaddr_storage()
        let len = Self.fill(&storage, address)
        let n = bytes.withUnsafeBytes { buf in
            withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, buf.baseAddress, buf.count, Int32(MSG_DONTWAIT), $0, len)
                }
            }
        }
        return n == bytes.count
    }

    static func receiveDatagram(fd: Int32, into buffer: inout [UInt8]) -> (count: Int, from: SocketAddress)? {
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let n = buffer.withUnsafeMutableBytes { buf in
            withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    recvfrom(fd, buf.baseAddress, buf.count, Int32(MSG_DONTWAIT), $0, &len)
                }
            }
        }
        guard n >= 0, let from = Self.address(of: storage) else { return nil }
        return (n, from)
    }

    static func fill(_ s: inout sockaddr_storage, _ a: SocketAddress) -> socklen_t {
        switch a.ip {
        case .v4(let b):
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = a.port.bigEndian
            withUnsafeMutableBytes(of: &sin.sin_addr) { $0.copyBytes(from: b) }
            withUnsafeMutableBytes(of: &s) { dst in withUnsafeBytes(of: sin) { dst.copyMemory(from: $0) } }
            return socklen_t(MemoryLayout<sockaddr_in>.size)
        case .v6(let b):
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = a.port.bigEndian
            withUnsafeMutableBytes(of: &sin6.sin6_addr) { $0.copyBytes(from: b) }
            withUnsafeMutableBytes(of: &s) { dst in withUnsafeBytes(of: sin6) { dst.copyMemory(from: $0) } }
            return socklen_t(MemoryLayout<sockaddr_in6>.size)
        }
    }

    public static func address(of s: sockaddr_storage) -> SocketAddress? {
        var s = s
        switch Int32(s.ss_family) {
        case AF_INET:
            return withUnsafeBytes(of: &s) { raw in
                let sin = raw.load(as: sockaddr_in.self)
                let ip = withUnsafeBytes(of: sin.sin_addr) { Array($0) }
                return SocketAddress(.v4(ip), UInt16(bigEndian: sin.sin_port))
            }
        case AF_INET6:
            return withUnsafeBytes(of: &s) { raw in
                let sin6 = raw.load(as: sockaddr_in6.self)
                let ip = withUnsafeBytes(of: sin6.sin6_addr) { Array($0) }
                return SocketAddress(.v6(ip), UInt16(bigEndian: sin6.sin6_port))
            }
        default:
            return nil
        }
    }
}
