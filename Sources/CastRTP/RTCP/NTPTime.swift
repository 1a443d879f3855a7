import CastCore

/// A 64-bit NTP timestamp (RFC 5905 §6; RFC 3550 §4): seconds since 1900 in the
/// high word, the binary fraction in the low word.
public struct NTPTime: Equatable, Hashable, Sendable {
    public var rawValue: UInt64

    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// Seconds from 1900-01-01 to 1970-01-01.
    public static let unixEpochOffset: UInt64 = 2_208_988_800

    /// The NTP time of `instant`, given the Unix time at which the monotonic
    /// clock read zero (`wallclockOffset`, measured once by the IO shell).
    public init(_ instant: Instant, wallclockOffset: Duration) {
        let unixNs = instant.nanoseconds &+ wallclockOffset.totalNanoseconds
        let ns = UInt64(max(0, unixNs))
        let secs = ns / 1_000_000_000 + Self.unixEpochOffset
        let frac = ((ns % 1_000_000_000) << 32) / 1_000_000_000
        rawValue = (secs << 32) | frac
    }

    /// The middle 32 bits (RFC 3550 §6.4.1: LSR), 16.16 fixed-point seconds.
    public var compact: UInt32 { UInt32(truncatingIfNeeded: rawValue >> 16) }
}

/// Durations in RTCP's 1/65536-second unit (DLSR, RFC 3550 §6.4.1).
public enum CompactNTPDuration {
    public static func duration(_ units: UInt32) -> Duration {
        .nanoseconds(Int64(units) * 1_000_000_000 / 65_536)
    }

    public static func units(_ d: Duration) -> UInt32 {
        let ns = max(0, d.totalNanoseconds)
        return UInt32(clamping: ns / 1_000_000_000 * 65_536 + (ns % 1_000_000_000) * 65_536 / 1_000_000_000)
    }
}
