import CastCore
import CastSession
import FoundationEssentials

/// Turns the backend's wall-clock times (ISO 8601, e.g. `senderAuthExpiresAt`)
/// into the monotonic `Instant`s the session logic runs on: reads both clocks and
/// hands them to `BackendTime` (CastSession). The only place castd reads the wall
/// clock for that.
public struct WallClockMapping: Sendable {
    public let clock: MonotonicClock
    public init(clock: MonotonicClock) { self.clock = clock }

    public func instant(forISO iso: String?, now: Date = Date()) -> Instant? {
        BackendTime.instant(forISO: iso, wallNow: now, monotonicNow: clock.now())
    }
}
