import CastCore
import CastSignaling
import CastWebRTC

#if canImport(Glibc)
import Glibc
#endif

/// Turns ice-config's `stun:` URLs (RFC 7064) into addresses for the ICE agent, and its
/// `turn:`/`turns:` URLs (RFC 7065) with their `username`/`credential` into TURN servers.
public enum ICEServerResolver {
    /// The TURN servers of ice-config, resolved, each under its URL (which names it in logs
    /// and errors; the credentials stay in `TURNServer.password`, redacted). Entries without
    /// credentials or with an unusable URL are returned as sentences in `skipped`.
    public static func turnServers(_ ice: IceConfig) -> (servers: [TURNServer], skipped: [String]) {
        var servers: [TURNServer] = []
        var skipped: [String] = []
        for entry in ice.iceServers {
            for url in entry.urls {
                let lower = url.lowercased()
                guard lower.hasPrefix("turn:") || lower.hasPrefix("turns:") else { continue }
                guard let (host, port, transport) = parseTURN(url) else {
                    skipped.append("TURN URL \(url) is not turn:host[:port][?transport=udp|tcp] or turns:host[:port]")
                    continue
                }
                guard let user = entry.username, let credential = entry.credential?.unredacted else {
                    skipped.append("TURN server \(url) has no username and credential in ice-config")
                    continue
                }
                let addresses = resolve(host: host, port: port)
                if addresses.isEmpty { skipped.append("TURN server \(url): \(host) does not resolve") }
                for a in addresses {
                    servers.append(TURNServer(address: a, transport: transport, name: url, host: host, username: user, password: credential))
                }
            }
        }
        return (servers, skipped)
    }

    /// RFC 7065 §3.1: `turn:` defaults to UDP on 3478, `turns:` to TLS on 5349;
    /// `?transport=tcp` asks for TCP (with `turns:` it stays TLS, which runs over TCP).
    public static func parseTURN(_ url: String) -> (String, UInt16, TURNTransport)? {
        let lower = url.lowercased()
        let secure = lower.hasPrefix("turns:")
        var rest = String(url.dropFirst(secure ? 6 : 5))
        var transport: TURNTransport = secure ? .tls : .udp
        if let q = rest.firstIndex(of: "?") {
            let query = rest[rest.index(after: q)...].lowercased()
            rest = String(rest[..<q])
            switch query {
            case "transport=udp": if secure { return nil }
            case "transport=tcp": if !secure { transport = .tcp }
            default: return nil
            }
        }
        guard let (host, port) = hostPort(rest, defaultPort: secure ? 5349 : 3478) else { return nil }
        return (host, port, transport)
    }

    public static func stunAddresses(_ ice: IceConfig) -> [SocketAddress] {
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
        return hostPort(rest, defaultPort: 3478)
    }

    /// `host`, `host:port`, `[v6]` or `[v6]:port`.
    static func hostPort(_ rest: String, defaultPort: UInt16) -> (String, UInt16)? {
        if rest.hasPrefix("[") , let close = rest.firstIndex(of: "]") {
            let host = String(rest[rest.index(after: rest.startIndex)..<close])
            let tail = rest[rest.index(after: close)...]
            let port = tail.hasPrefix(":") ? UInt16(tail.dropFirst()) : defaultPort
            return port.map { (host, $0) }
        }
        let parts = rest.split(separator: ":", omittingEmptySubsequences: false)
        if parts.count == 1 { return rest.isEmpty ? nil : (rest, defaultPort) }
        guard parts.count == 2, !parts[0].isEmpty, let p = UInt16(parts[1]) else { return nil }
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
