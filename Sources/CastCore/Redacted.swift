/// A value that must never reach a log or an error text: tokens, refresh
/// tokens, PINs, SRTP keys (STYLE.md rule 6). Its description is fixed; the
/// value is reachable only through `unredacted`, which makes every use visible.
public struct Redacted<Value: Sendable>: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    public let unredacted: Value
    public init(_ value: Value) { unredacted = value }
    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
}

extension Redacted: Equatable where Value: Equatable {}
extension Redacted: Hashable where Value: Hashable {}

/// Network addresses go through this one helper before they are logged.
/// Loopback stays readable (it identifies nobody); anything else keeps only
/// its family and a short stable hash so that log lines can still be matched.
public enum AddressRedaction {
    public static func redact(_ address: String) -> String {
        if address.hasPrefix("127.") || address == "::1" || address == "localhost" { return address }
        var h: UInt32 = 2_166_136_261
        for b in address.utf8 { h = (h ^ UInt32(b)) &* 16_777_619 }
        let family = address.contains(":") ? "v6" : (address.hasSuffix(".local") ? "mdns" : "v4")
        return "\(family)#" + String(h & 0xffff, radix: 16)
    }
}
