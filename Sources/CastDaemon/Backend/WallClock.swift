import CastCore
import CastSignaling
import FoundationEssentials

/// Turns the backend's wall-clock times (ISO 8601, e.g. `senderAuthExpiresAt`)
/// into the monotonic `Instant`s the session logic runs on. The only place
/// castd reads the wall clock for that.
public struct WallClockMapping: Sendable {
    public let clock: MonotonicClock
    public init(clock: MonotonicClock) { self.clock = clock }

    /// Parses `2026-10-20T12:40:00.000Z` (fractional seconds optional); nil when unreadable.
    /// Read by hand (`Timestamp`, the signaling's own), not with ISO8601DateFormatter,
    /// which pages in ICU's calendar and number data: ~3.5 MiB of castd's resident memory.
    public static func parse(_ iso: String) -> Date? {
        Timestamp.microseconds(iso).map { Date(timeIntervalSince1970: Double($0) / 1e6) }
    }

    public func instant(forISO iso: String?, now: Date = Date()) -> Instant? {
        guard let iso, let date = Self.parse(iso) else { return nil }
        let delta = date.timeIntervalSince(now)
        // Any ISO time a row may carry (up to 9999-12-31) must map without a trap: the
        // conversion and the addition saturate (issue 17: one row crashed castd here).
        return clock.now() + .nanoseconds(Int64(saturating: delta * 1e9))
    }
}
