import CastCore

/// When to capture and encode: ticks on a monotonic schedule at the frame
/// rate (30 fps, or the receiver's preference capped at 30, spec §12), anchored
/// at a start instant so that rounding never drifts. On a tick where damage
/// says nothing changed the frame is skipped, but at least one refresh goes
/// out per `refreshInterval` so that receivers never time out on a still screen.
/// Pure: the owner passes `now` and sleeps until `nextTick` itself.
public struct FramePacer: Sendable {
    public enum Decision: Equatable, Sendable {
        /// Not yet time: come back at this instant.
        case wait(until: Instant)
        /// Encode: something changed.
        case encode
        /// Encode although nothing changed (the once-per-interval refresh).
        case refresh
        /// Nothing changed and a refresh is not due.
        case skip
    }

    public private(set) var frameRate: Int
    public let refreshInterval: Duration
    private var anchor: Instant
    private var tickIndex: Int64
    private var lastEncode: Instant?
    /// Ticks that went by while the owner was late (it slept too long or encoding overran).
    public private(set) var missedTicks: Int64 = 0

    public init(frameRate: Int, start: Instant, refreshInterval: Duration = .seconds(1)) {
        precondition(frameRate > 0)
        self.frameRate = frameRate
        self.refreshInterval = refreshInterval
        anchor = start
        tickIndex = 0
    }

    /// The instant of tick `k` after the anchor: k·10⁹/fps, computed exactly each time.
    private func tick(_ k: Int64) -> Instant {
        anchor + .nanoseconds(k * 1_000_000_000 / Int64(frameRate))
    }

    public var nextTick: Instant { tick(tickIndex) }

    /// Whether a refresh would be due at `now` if nothing changed (the
    /// capture shell uses it to skip reading the screen at all).
    public func refreshDue(now: Instant) -> Bool {
        guard let lastEncode else { return true }
        return now - lastEncode >= refreshInterval
    }

    /// Call at or after `nextTick` with whether the screen changed. Advances
    /// the schedule past `now` (late ticks are counted, never bunched up).
    public mutating func decide(now: Instant, changed: Bool) -> Decision {
        let due = tick(tickIndex)
        if now < due { return .wait(until: due) }
        // The first tick strictly after now: k = floor((now - anchor)·fps / 10⁹) + 1.
        let elapsed = (now - anchor).totalNanoseconds
        var next = elapsed * Int64(frameRate) / 1_000_000_000 + 1
        // tick() rounds down, so the estimate can land one tick early.
        while tick(next) <= now { next += 1 }
        missedTicks += next - tickIndex - 1
        tickIndex = next
        if changed {
            lastEncode = now
            return .encode
        }
        if refreshDue(now: now) {
            lastEncode = now
            return .refresh
        }
        return .skip
    }

    /// Changes the rate (receiver preference, already capped), re-anchoring at `now`.
    public mutating func setFrameRate(_ fps: Int, now: Instant) {
        precondition(fps > 0)
        frameRate = fps
        anchor = now
        tickIndex = 0
    }
}
