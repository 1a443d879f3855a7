import CastCore
import CastSignaling
import CastWebRTC

#if canImport(Glibc)
import Glibc
#endif

/// Turns ice-config's `stun:` URLs (RFC 7064) into addresses for the ICE agent.
/// TURN entries are not used yet (relay candidates are later work).
enum ICEServerResolver {
    static func stunAddresses(_ ice: IceConfig) -> [SocketAddress] {
        var out: [SocketAddress] = []
        for server in ice.iceServers {
            for url in server.urls {
                guard let (host, port) = parse(url) else { continue }
                out += resolve(host: host, port: port)
            }
        }
        return out
    }

    /// `stun:host[:port]` (default port 3478); nil for other schemes.
    static func parse(_ url: String) -> (String, UInt16)? {
        guard url.lowercased().hasPrefix("stun:") else { return nil }
        var rest = String(url.dropFirst(5))
        if let q = rest.firstIndex(of: "?") { rest = String(rest[..<q]) }
        if rest.hasPrefix("[") , let close = rest.firstIndex(of: "]") {
            let host = String(rest[rest.index(after: rest.startIndex)..<close])
            let tail = rest[rest.index(after: close)...]
            let port = tail.hasPrefix(":") ? UInt16(tail.dropFirst()) : 3478
            return port.map { (host, $0) }
        }
        let parts = rest.split(separator: ":", omittingEmptySubsequences: false)
        if parts.count == 1 { return (rest, 3478) }
        guard parts.count == 2, let p = UInt16(parts[1]) else { return nil }
        return (String(parts[0]), p)
    }

    static func resolve(host: String, port: UInt16) -> [SocketAddress] {
        if let ip = IPAddress(host) { return [SocketAddress(ip, port)] }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        var res: UnsafeMutablePointer<addrinfo>? = nil
        guard getaddrinfo(host, nil, &hints, &res) == 0, let first = res else { return [] }
        defer { freeaddrinfo(res) }
        var out: [SocketAddress] = []
        var p: UnsafeMutablePointer<addrinfo>? = first
        while let ai = p {
            defer { p = ai.pointee.ai_next }
            guard let sa = ai.pointee.ai_addr else { continue }
            var storage = sockaddr_storage()
            withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: UnsafeRawBufferPointer(start: sa, count: Int(ai.pointee.ai_addrlen))) }
            if let a = UDPSocket.address(of: storage) {
                let s = SocketAddress(a.ip, port)
                if !out.contains(s) { out.append(s) }
            }
        }
        return out
    }
}
