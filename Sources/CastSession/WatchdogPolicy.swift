import CastCore

/// When castd may tell systemd it is alive (`WATCHDOG=1`, sd_notify(3); the unit's
/// `WatchdogSec=`), decided once a tick from what the session is doing and what the media
/// did (issue 17). Pure: the owner passes the facts and the time in and acts on the verdict.
///
/// - While the session waits (sign-in, approval, answer, spec §11 backoff, a media restart's
///   backoff), it feeds: the session machine bounds each of those waits with its own timer.
/// - While media runs it feeds only if a frame was encoded within `stallAfter` (a still
///   screen is refreshed a little under every second, so it counts as progress); a longer gap
///   is a stall, reported to the session (which reopens the media) and still fed, since the
///   session is about to act. Before the first frame after a (re)start, `firstFrameGrace`
///   applies instead (the portal's dialog may wait for a person; `--portal-timeout` bounds it).
/// - A media start or stop that does not return within `mediaCallBudget` means a stuck
///   thread: it starves the watchdog, and systemd restarts castd.
public struct WatchdogPolicy: Sendable, Equatable {
    public var stallAfter: Duration = .seconds(5)
    public var firstFrameGrace: Duration = .seconds(90)
    public var mediaCallBudget: Duration = .seconds(10)

    public init() {}

    /// One tick's facts.
    public struct Facts: Sendable, Equatable {
        public var mediaRunning: Bool
        /// When the media was last started (nil: never, or stopped).
        public var mediaStartedAt: Instant?
        /// When the last frame was encoded (nil: none yet).
        public var lastFrameAt: Instant?
        /// When a media start or stop began that has not returned yet.
        public var mediaCallSince: Instant?
        public var ended: Bool

        public init(mediaRunning: Bool, mediaStartedAt: Instant?, lastFrameAt: Instant?,
                    mediaCallSince: Instant?, ended: Bool = false) {
            self.mediaRunning = mediaRunning; self.mediaStartedAt = mediaStartedAt
            self.lastFrameAt = lastFrameAt; self.mediaCallSince = mediaCallSince; self.ended = ended
        }
    }

    public enum Verdict: Sendable, Equatable {
        case feed
        /// Feed, and tell the session the media stalled (`SessionMachine.Input.mediaFailed`).
        case stalled(String)
        /// Do not feed: castd is stuck, and systemd should restart it.
        case starve(String)
    }

    public func evaluate(_ f: Facts, now: Instant) -> Verdict {
        if let since = f.mediaCallSince, now - since > mediaCallBudget {
            return .starve("a media start or stop has not returned for \(Int((now - since).seconds)) s")
        }
        guard f.mediaRunning, !f.ended, let started = f.mediaStartedAt else { return .feed }
        if let last = f.lastFrameAt, last >= started {
            let gap = now - last
            return gap > stallAfter ? .stalled("no frame encoded for \(Int(gap.seconds)) s") : .feed
        }
        let waited = now - started
        return waited > firstFrameGrace ? .stalled("no first frame \(Int(waited.seconds)) s after the media started") : .feed
    }
}
