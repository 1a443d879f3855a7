import CastCore
import CastSystem
import CastWebRTC

#if canImport(Glibc)
import Glibc
#endif

/// The IO half of mDNS (RFC 6762): one UDP socket on port 5353, shared with any
/// other responder on the host (SO_REUSEADDR + SO_REUSEPORT; Chromium and avahi
/// bind it too). It joins the mDNS group of its family on each interface given
/// just before it sends its first datagram, i.e. the first query castd really
/// sends (the resolver asks only for a name it has not heard announced), so a
/// receiver that shows real addresses (aiortc, a Chrome with mDNS hiding off),
/// or one whose announcement was heard first, never makes castd send IGMP/MLD
/// reports. Sending to the group sends one copy out of every interface, so a
/// query reaches responders on loopback and on the LAN alike; multicast loop is
/// on, so announcements of processes on this host (Chromium's) are heard — even
/// before castd joins when another socket of the host joined the group on that
/// interface, as Linux delivers group datagrams to every socket bound to the
/// port (IP_MULTICAST_ALL, on by default).
public final class MulticastDNSSocket: DatagramSocket, @unchecked Sendable {
    public let fd: Int32
    public let local: SocketAddress
    /// Where each copy of a group datagram leaves: an IPv4 interface address, or an IPv6 interface index.
    private let outgoing: [Outgoing]
    /// Names of the interfaces queries leave through and the group is joined on (at the first send).
    public let interfaces: [String]
    /// The interfaces that joined the group, once the first send joined it (nil before); owner thread only.
    public private(set) var joined: [String]? = nil

    enum Outgoing {
        case v4(in_addr)
        case v6(UInt32)
    }

    /// Binds `[::]:5353` or `0.0.0.0:5353` and picks the interfaces of `addresses`
    /// of that family to join later. Throws when the port cannot be bound or no
    /// interface qualifies (castd then runs without mDNS).
    public init(ipv6: Bool, addresses: [NetworkInterfaces.Address]) throws {
        let family = ipv6 ? AF_INET6 : AF_INET
        let fd = socket(family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw CastError.posix("socket") }
        var ok = true
        func opt(_ level: Int32, _ name: Int32, _ value: Int32) {
            var v = value
            if setsockopt(fd, level, name, &v, socklen_t(MemoryLayout<Int32>.size)) != 0 { ok = false }
        }
        opt(SOL_SOCKET, SO_REUSEADDR, 1)
        opt(SOL_SOCKET, SO_REUSEPORT, 1)
        if ipv6 {
            opt(Int32(IPPROTO_IPV6), IPV6_V6ONLY, 1)
            opt(Int32(IPPROTO_IPV6), IPV6_MULTICAST_HOPS, 255)   // RFC 6762 §11
            opt(Int32(IPPROTO_IPV6), IPV6_MULTICAST_LOOP, 1)
        } else {
            opt(Int32(IPPROTO_IP), IP_MULTICAST_TTL, 255)
            opt(Int32(IPPROTO_IP), IP_MULTICAST_LOOP, 1)
        }
        let any = SocketAddress(ipv6 ? IPAddress("::")! : IPAddress("0.0.0.0")!, MDNS.port)
        var storage = sockaddr_storage()
        let len = UDPSocket.fill(&storage, any)
        let r = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) }
        }
        guard ok, r == 0 else {
            let e = CastError.posix("mDNS: cannot use UDP port 5353 (\(ipv6 ? "IPv6" : "IPv4"))")
            close(fd)
            throw e
        }
        var outgoing: [Outgoing] = []
        var names: [String] = []
        for a in addresses where a.ip.isIPv6 == ipv6 && !names.contains(a.interface) {
            if ipv6 {
                let index = if_nametoindex(a.interface)
                guard index != 0 else { continue }
                outgoing.append(.v6(index))
            } else {
                var addr = in_addr()
                withUnsafeMutableBytes(of: &addr) { $0.copyBytes(from: a.ip.bytes) }
                outgoing.append(.v4(addr))
            }
            names.append(a.interface)
        }
        guard !outgoing.isEmpty else {
            close(fd)
            throw CastError(.io, "no interface for the mDNS group \(ipv6 ? "ff02::fb" : "224.0.0.251")")
        }
        self.fd = fd
        self.local = any
        self.outgoing = outgoing
        self.interfaces = names
    }

    /// Joins the group on every interface picked at init, once (the first `send` does it,
    /// so that the answers to that query are heard). An interface that refuses is
    /// skipped (queries still leave through it).
    private func joinGroups() {
        guard joined == nil else { return }
        var ok: [String] = []
        for (o, name) in zip(outgoing, interfaces) {
            switch o {
            case .v6(let index):
                var m = ipv6_mreq()
                withUnsafeMutableBytes(of: &m.ipv6mr_multiaddr) { $0.copyBytes(from: MDNS.ipv6Group.bytes) }
                m.ipv6mr_interface = index
                if setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_ADD_MEMBERSHIP, &m, socklen_t(MemoryLayout<ipv6_mreq>.size)) == 0 {
                    ok.append(name)
                }
            case .v4(let addr):
                var m = ip_mreq()
                withUnsafeMutableBytes(of: &m.imr_multiaddr) { $0.copyBytes(from: MDNS.ipv4Group.bytes) }
                m.imr_interface = addr
                if setsockopt(fd, Int32(IPPROTO_IP), IP_ADD_MEMBERSHIP, &m, socklen_t(MemoryLayout<ip_mreq>.size)) == 0 {
                    ok.append(name)
                }
            }
        }
        joined = ok
    }

    deinit { close(fd) }

    /// Joins the group (first call only), then sends one copy out of every interface;
    /// true when at least one left. Call it on the socket's owner thread.
    @discardableResult
    public func send(_ bytes: [UInt8], to address: SocketAddress) -> Bool {
        joinGroups()
        var sent = false
        for o in outgoing {
            switch o {
            case .v4(var addr):
                guard setsockopt(fd, Int32(IPPROTO_IP), IP_MULTICAST_IF, &addr, socklen_t(MemoryLayout<in_addr>.size)) == 0 else { continue }
            case .v6(let index):
                var i = Int32(bitPattern: index)
                guard setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_MULTICAST_IF, &i, socklen_t(MemoryLayout<Int32>.size)) == 0 else { continue }
            }
            if UDPSocket.sendDatagram(fd: fd, bytes, to: address) { sent = true }
        }
        return sent
    }

    public func receive(into buffer: inout [UInt8]) -> (count: Int, from: SocketAddress)? {
        UDPSocket.receiveDatagram(fd: fd, into: &buffer)
    }
}
