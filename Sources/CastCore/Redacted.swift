/// A value that must never reach a log or an error text: tokens, refresh
/// tokens, PINs, SRTP keys (rule 6, docs/architecture.md). Its description is fixed; the
/// value is reachable only through `unredacted`, which makes every use visible.
/// It is `CustomReflectable` with no children, so `dump()`, `Mirror` and
/// string interpolation of an enclosing struct show `<redacted>` too (issue 17).
public struct Redacted<Value: Sendable>: Sendable, CustomStringConvertible, CustomDebugStringConvertible,
                                         CustomReflectable {
    public let unredacted: Value
    public init(_ value: Value) { unredacted = value }
    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}

extension Redacted: Equatable where Value: Equatable {}
extension Redacted: Hashable where Value: Hashable {}

/// Network addresses go through this one helper before they are logged.
/// Loopback stays readable (it identifies nobody); anything else keeps only
/// its family and a keyed hash, so that log lines of one run can still be
/// matched. The key is random per process (issue 17: an unkeyed 16-bit hash is
/// reversed by hashing every address of a known subnet); the same address
/// therefore redacts differently in two runs, which is the point.
public enum AddressRedaction {
    /// 128 random bits drawn once per process; they never leave it.
    private static let key: (UInt64, UInt64) = {
        var g = SystemRandomNumberGenerator()
        return (g.next(), g.next())
    }()

    public static func redact(_ address: String) -> String {
        if address.hasPrefix("127.") || address == "::1" || address == "localhost" { return address }
        // Hasher is SipHash-1-3 under Swift's own per-process seed; the explicit key keeps
        // it secret even where SWIFT_DETERMINISTIC_HASHING fixes that seed.
        var h = Hasher()
        h.combine(key.0)
        h.combine(key.1)
        h.combine(address)
        let tag = UInt32(truncatingIfNeeded: h.finalize())
        let family = address.contains(":") ? "v6" : (address.hasSuffix(".local") ? "mdns" : "v4")
        // Always eight hex digits: a shorter tag could be a run of decimal digits alone, which
        // the fault run's secrets check cannot tell from a PIN.
        let hex = String(tag, radix: 16)
        return "\(family)#" + String(repeating: "0", count: 8 - hex.count) + hex
    }
}
