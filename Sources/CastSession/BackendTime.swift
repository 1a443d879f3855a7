import CastCore
import CastSignaling
import FoundationEssentials

/// The backend's wall-clock times (ISO 8601, e.g. `senderAuthExpiresAt`) turned into
/// the monotonic `Instant`s the session logic runs on. Pure: the owner passes both
/// clocks' readings (`WallClockMapping` in the daemon reads them), so the fuzz target
/// maps a hostile row's time exactly as a cast does.
public enum BackendTime {
    /// Parses `2026-10-20T12:40:00.000Z` (fractional seconds optional); nil when unreadable.
    /// Read by hand (`Timestamp`, the signaling's own), not with ISO8601DateFormatter,
    /// which pages in ICU's calendar and number data: ~3.5 MiB of castd's resident memory.
    public static func parse(_ iso: String) -> Date? {
        Timestamp.microseconds(iso).map { Date(timeIntervalSince1970: Double($0) / 1e6) }
    }

    /// `iso` on the monotonic clock, given that the wall clock read `wallNow` when the
    /// monotonic clock read `monotonicNow`; nil when `iso` is absent or unreadable.
    public static func instant(forISO iso: String?, wallNow: Date, monotonicNow: Instant) -> Instant? {
        guard let iso, let date = parse(iso) else { return nil }
        let delta = date.timeIntervalSince(wallNow)
        // Any ISO time a row may carry (up to 9999-12-31) must map without a trap: the
        // conversion and the addition saturate (issue 17: one row crashed castd here).
        return monotonicNow + .nanoseconds(Int64(saturating: delta * 1e9))
    }
}
