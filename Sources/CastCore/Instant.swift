/// A point on a monotonic clock, in nanoseconds from an arbitrary origin.
///
/// Pure code never reads a clock (rule 1, docs/architecture.md): it is handed an `Instant`
/// by its owner, so that tests can drive it with a fake clock.
public struct Instant: Comparable, Hashable, Sendable, CustomStringConvertible {
    public var nanoseconds: Int64

    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    public static let zero = Instant(nanoseconds: 0)

    public static func < (a: Instant, b: Instant) -> Bool { a.nanoseconds < b.nanoseconds }

    // Saturating, not wrapping: a deadline derived from a backend value (an
    // authorization that expires in the year 9999) must stay in the far future,
    // not wrap round into the past (issue 17).
    public static func + (a: Instant, d: Duration) -> Instant {
        Instant(nanoseconds: a.nanoseconds.saturatingAdd(d.totalNanoseconds))
    }

    public static func - (a: Instant, d: Duration) -> Instant {
        Instant(nanoseconds: a.nanoseconds.saturatingSubtract(d.totalNanoseconds))
    }

    /// The duration from `b` to `a` (negative when `a` is earlier), saturating.
    public static func - (a: Instant, b: Instant) -> Duration {
        .nanoseconds(a.nanoseconds.saturatingSubtract(b.nanoseconds))
    }

    public var description: String { "\(Double(nanoseconds) / 1e9)s" }
}

extension Duration {
    /// The whole duration in nanoseconds, saturating at the bounds of Int64.
    public var totalNanoseconds: Int64 {
        let (s, atto) = components
        let (ns, o1) = s.multipliedReportingOverflow(by: 1_000_000_000)
        if o1 { return s < 0 ? .min : .max }
        let (sum, o2) = ns.addingReportingOverflow(atto / 1_000_000_000)
        if o2 { return s < 0 ? .min : .max }
        return sum
    }

    /// The duration in seconds as a floating-point number.
    public var seconds: Double { Double(totalNanoseconds) / 1e9 }

    /// Milliseconds with two decimals, rounded to the nearest hundredth ("20.25"): the
    /// form of the `stats` log line's latency fields (StageTimes, LatencyHistogram).
    public var millisecondsText: String {
        let hundredths = totalNanoseconds.saturatingAdd(5_000) / 10_000
        let whole = hundredths / 100, frac = hundredths % 100
        return "\(whole).\(frac < 10 ? "0" : "")\(frac)"
    }
}

/// A source of `Instant`s. Only the IO shell holds a real one.
public protocol MonotonicClock: Sendable {
    func now() -> Instant
}

/// A clock a test moves by hand.
public final class ManualClock: MonotonicClock, @unchecked Sendable {
    // Tests own it from one task; it is a class so that copies share the time.
    private var current: Instant
    public init(_ start: Instant = .zero) { current = start }
    public func now() -> Instant { current }
    public func advance(by d: Duration) { current = current + d }
    public func set(_ t: Instant) { current = t }
}
