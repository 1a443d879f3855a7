import CastCore
import CastWebRTC

#if canImport(Glibc)
import Glibc
#endif

/// The local addresses ICE may gather host candidates on (RFC 8445 §5.1.1.1).
public enum NetworkInterfaces {
    public struct Address: Equatable, Sendable {
        public var interface: String
        public var ip: IPAddress
    }

    /// Addresses of interfaces that are up. Loopback only when asked for
    /// (tests on one machine); IPv6 link-local never (it needs a scope id and
    /// receivers do not use it); IPv4 link-local never.
    public static func usable(includeLoopback: Bool = false) -> [Address] {
        var head: UnsafeMutablePointer<ifaddrs>? = nil
        guard getifaddrs(&head) == 0, let first = head else { return [] }
        defer { freeifaddrs(head) }
        var out: [Address] = []
        var p: UnsafeMutablePointer<ifaddrs>? = first
        while let ifa = p {
            defer { p = ifa.pointee.ifa_next }
            let flags = Int32(ifa.pointee.ifa_flags)
            guard flags & Int32(IFF_UP) != 0, flags & Int32(IFF_RUNNING) != 0,
                  let sa = ifa.pointee.ifa_addr else { continue }
            let family = Int32(sa.pointee.sa_family)
            guard family == AF_INET || family == AF_INET6 else { continue }
            var storage = sockaddr_storage()
            let size = family == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size
            withUnsafeMutableBytes(of: &storage) { dst in dst.copyMemory(from: UnsafeRawBufferPointer(start: sa, count: size)) }
            guard let addr = UDPSocket.address(of: storage) else { continue }
            if addr.ip.isLinkLocal { continue }
            if addr.ip.isLoopback && !includeLoopback { continue }
            out.append(Address(interface: String(cString: ifa.pointee.ifa_name), ip: addr.ip))
        }
        return out
    }
}
