import CastCore

/// When to read the screen (issue 19): as soon as the source says it changed
/// (XDamage, a PipeWire buffer), never two frames closer than one frame
/// interval (a minimum interval, not a grid: a change that comes after a quiet
/// spell is read at once instead of on the next tick), a refresh of a still
/// screen once per `refreshInterval` so that receivers never time out, and an
/// optional probe at the frame rate for changes no notification reports (the
/// X11 cursor is a sprite XDamage does not see).
///
/// The frame rate is the rate ladder's (30/20/15/10/5 fps, issue 14): it only
/// sets the minimum interval, so a change still goes out at once when the last
/// frame is old enough.
///
/// Sans-IO contract (str0m's shape, the one every new pure component follows):
/// the owner feeds each input with `handle(_:now:)` (`.timeout` when nothing
/// happened but a deadline passed), then calls `poll()` until it answers
/// `.wait(until:)`: every `.capture` before that is to be done now, in order.
/// The owner sleeps until that instant or until the next input, whichever comes
/// first. Pure: no clock reads, time is what `handle` was last given.
public struct CaptureScheduler: Sendable {
    public enum Input: Equatable, Sendable {
        /// The source reported a change (or a change could not be captured and is still pending).
        case changed
        /// A keyframe is wanted: read the screen whether it changed or not.
        case keyframeWanted
        /// The ladder's frame rate (frames per second, > 0; others are ignored).
        case frameRate(Int)
        /// The owner published a frame (for any reason, a probe's included).
        case captured
        /// A capture found the screen unchanged (a damage event whose region was already
        /// read, or damage outside the captured area): the minimum interval counts from the
        /// last frame again, so that the next real change is not held back by a look that
        /// produced nothing.
        case nothingChanged
        /// Only time passed.
        case timeout
    }

    /// Why a capture is due; `onlyIfChanged` is what to ask the source.
    public enum Reason: Equatable, Sendable {
        case changed, keyframe, refresh, probe
        public var onlyIfChanged: Bool { self == .changed || self == .probe }
    }

    public enum Output: Equatable, Sendable {
        /// Read the screen now.
        case capture(Reason)
        /// Nothing to do before this instant (unless an input comes first).
        case wait(until: Instant)
    }

    public private(set) var frameRate: Int
    public let refreshInterval: Duration
    /// Whether to look for unreported changes at the frame rate.
    public let probes: Bool
    private var now: Instant
    /// The last capture that could have produced a frame (not a probe that found nothing).
    private var lastCapture: Instant?
    /// The last frame published: the refresh is due `refreshInterval` after it.
    private var lastFrame: Instant?
    private var lastProbe: Instant?
    private var changed = false
    private var keyframe = false

    public init(frameRate: Int, now: Instant, refreshInterval: Duration = .milliseconds(900), probes: Bool = false) {
        self.frameRate = max(1, frameRate)
        self.refreshInterval = refreshInterval
        self.probes = probes
        self.now = now
    }

    /// The minimum interval between frames: 10⁹/fps ns, rounded down.
    public var minimumInterval: Duration { .nanoseconds(1_000_000_000 / Int64(frameRate)) }

    public mutating func handle(_ input: Input, now: Instant) {
        // Time never goes back, even if an owner passes an older instant.
        self.now = max(self.now, now)
        switch input {
        case .changed: changed = true
        case .keyframeWanted: keyframe = true
        case .frameRate(let fps): if fps > 0 { frameRate = fps }
        case .captured:
            lastCapture = self.now
            lastFrame = self.now
            lastProbe = self.now
        case .nothingChanged: lastCapture = lastFrame
        case .timeout: break
        }
    }

    /// Whether a change or a keyframe is waiting for the minimum interval to pass. The
    /// owner then has nothing to wait for but the deadline: a source that keeps saying
    /// "changed" until it is read (a PipeWire buffer) would otherwise wake it at once, again and again.
    public var pending: Bool { changed || keyframe }

    /// The next thing to do: a capture due now, or the instant to come back at.
    public mutating func poll() -> Output {
        let earliest = lastCapture.map { $0 + minimumInterval } ?? now
        if changed || keyframe {
            guard now >= earliest else { return .wait(until: earliest) }
            let reason: Reason = keyframe ? .keyframe : .changed
            changed = false
            keyframe = false
            return begin(reason)
        }
        let refreshAt = max(earliest, lastFrame.map { $0 + refreshInterval } ?? now)
        if now >= refreshAt { return begin(.refresh) }
        guard probes else { return .wait(until: refreshAt) }
        let probeAt = max(earliest, lastProbe.map { $0 + minimumInterval } ?? now)
        if now >= probeAt {
            // A probe that finds nothing costs a look, not a frame: it does not hold the next change back.
            lastProbe = now
            return .capture(.probe)
        }
        return .wait(until: min(refreshAt, probeAt))
    }

    private mutating func begin(_ reason: Reason) -> Output {
        // Counted from the attempt, so that a capture that yields nothing (every ring slot busy)
        // is retried an interval later, not in a tight loop.
        lastCapture = now
        lastProbe = now
        return .capture(reason)
    }
}
