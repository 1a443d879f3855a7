#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CastCore

/// An IPv4 or IPv6 address as raw network-order bytes. Parsing and printing use
/// inet_pton/inet_ntop (pure functions of their input; no IO).
public enum IPAddress: Hashable, Sendable, CustomStringConvertible {
    case v4([UInt8])   // 4 bytes
    case v6([UInt8])   // 16 bytes

    /// Parses dotted-quad IPv4 or RFC 4291 text IPv6 (a zone suffix `%eth0` is dropped).
    public init?(_ text: String) {
        var s = text
        if s.hasPrefix("[") && s.hasSuffix("]") { s = String(s.dropFirst().dropLast()) }
        if let pct = s.firstIndex(of: "%") { s = String(s[..<pct]) }
        if s.contains(":") {
            var buf = [UInt8](repeating: 0, count: 16)
            guard inet_pton(AF_INET6, s, &buf) == 1 else { return nil }
            self = .v6(buf)
        } else {
            var buf = [UInt8](repeating: 0, count: 4)
            guard inet_pton(AF_INET, s, &buf) == 1 else { return nil }
            self = .v4(buf)
        }
    }

    /// From raw bytes: 4 → IPv4, 16 → IPv6, anything else → nil.
    public init?(bytes: [UInt8]) {
        switch bytes.count {
        case 4: self = .v4(bytes)
        case 16: self = .v6(bytes)
        default: return nil
        }
    }

    public var bytes: [UInt8] {
        switch self { case .v4(let b), .v6(let b): return b }
    }

    public var isIPv6: Bool { if case .v6 = self { return true } else { return false } }

    public var isLoopback: Bool {
        switch self {
        case .v4(let b): return b[0] == 127
        case .v6(let b): return b == [UInt8](repeating: 0, count: 15) + [1]
        }
    }

    /// Whether a datagram may be sent here as to one peer: not unspecified or "this network"
    /// (0.0.0.0/8, ::), not multicast (224.0.0.0/4, ff00::/8), not the IPv4 reserved and
    /// broadcast block (240.0.0.0/4), not IPv4-mapped IPv6 (::ffff:0:0/96, an IPv4 target
    /// in disguise). A remote candidate elsewhere would make ICE checks a flood tool.
    public var isUnicastDestination: Bool {
        switch self {
        case .v4(let b): return b[0] != 0 && b[0] < 224
        case .v6(let b):
            if b.allSatisfy({ $0 == 0 }) || b[0] == 0xff { return false }
            return !(b[0..<10].allSatisfy { $0 == 0 } && b[10] == 0xff && b[11] == 0xff)
        }
    }

    /// fe80::/10 (RFC 4291 §2.5.6).
    public var isLinkLocal: Bool {
        switch self {
        case .v4(let b): return b[0] == 169 && b[1] == 254
        case .v6(let b): return b[0] == 0xfe && (b[1] & 0xc0) == 0x80
        }
    }

    public var description: String {
        switch self {
        case .v4(let b):
            return "\(b[0]).\(b[1]).\(b[2]).\(b[3])"
        case .v6(let b):
            var out = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            _ = inet_ntop(AF_INET6, b, &out, socklen_t(out.count))
            return String(cString: out)
        }
    }
}

/// An IP address and a UDP port: the from/to of every datagram the ICE agent sees.
/// Its description goes through `AddressRedaction` so it may be logged.
public struct SocketAddress: Hashable, Sendable, CustomStringConvertible {
    public var ip: IPAddress
    public var port: UInt16

    public init(_ ip: IPAddress, _ port: UInt16) {
        self.ip = ip
        self.port = port
    }

    /// "1.2.3.4:5" or "[::1]:5"; nil when malformed.
    public init?(_ text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]),
              let ip = IPAddress(String(text[..<colon])) else { return nil }
        if case .v6 = ip, !text.hasPrefix("[") { return nil }
        self.init(ip, port)
    }

    /// The address written plainly ("[::1]:5"): for wire formats and tests, never logs.
    public var unredactedText: String {
        ip.isIPv6 ? "[\(ip)]:\(port)" : "\(ip):\(port)"
    }

    public var description: String { "\(AddressRedaction.redact(ip.description)):\(port)" }
}
