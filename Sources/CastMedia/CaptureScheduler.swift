import CastCore

/// When to read the screen (issue 19): as soon as the source says it changed
/// (XDamage, a PipeWire buffer), never two frames closer than one frame
/// interval (a minimum interval, not a grid: a change that comes after a quiet
/// spell is read at once instead of on the next tick), a refresh of a still
/// screen once per `refreshInterval` so that receivers never time out (at the frame rate
/// while the encoder refines a still picture: `Input.refining`, `StillRefinement`), and an
/// optional probe at the frame rate for changes no notification reports (the
/// X11 cursor is a sprite XDamage does not see).
///
/// Phase lock (`phaseLock`, for a source that reports every change, XDamage): a screen
/// that changes faster than the frame rate (a 60 Hz animation read at 30 fps), or as fast
/// out of phase, always has a change pending when the minimum interval ends, and reading it
/// then reads a picture up to one source period old (8.3 ms on average at 60 Hz; at 30 Hz
/// whatever phase the first frame fell on, the same for every frame). When the changes come on a
/// steady cadence and the pending one is older than `fresh`, the read waits for the next
/// change instead (expected one cadence after the last, at most `maxHold` away; the
/// cadence is the median of the last gaps between changes, when half of them agree with it), so the picture
/// is read right after it was drawn. What a wait takes from the interval is given back by
/// the next one: the frame rate stays what it was, only the phase moves. A change that does
/// not come within its slack (a third of the cadence) ends the wait (two such in a row, or a
/// pause of two intervals, and the cadence is forgotten); keyframes and refreshes never wait.
/// A source about as
/// fast as the frame rate (a 30 Hz animation: its cadence at most `pullCadenceTolerance`
/// shorter than the interval) whose next change is more than half an interval away is not
/// waited for (that would lose a frame); its pending change is read, and the next interval
/// ends up to `pullStep` earlier, until the reads fall right after its changes (at most half
/// an interval of such pulls a second).
///
/// The next minimum interval counts from the instant a capture was due (the end of the
/// last interval, or the change or keyframe request that came after it), not from when the
/// owner got round to it, up to half an interval later: a wait for a fresher change is given
/// back so, and so is an owner thread that wakes late. Counting from the wake-up made every
/// interval longer by the thread's wake-up delay, so a 30 Hz screen read at 30 fps slipped
/// behind its changes until one was lost (28.1 of a 30 Hz painter's frames a second read with
/// Firefox decoding on the same two cores); the frames' anchors are still at least an
/// interval apart, so no second holds more frames than the rate.
///
/// The frame rate is the rate ladder's (30/20/15/10/5 fps, issue 14): it only
/// sets the minimum interval, so a change still goes out at once when the last
/// frame is old enough.
///
/// The one sans-IO contract (`SansIO` in CastCore): the owner feeds each input with
/// `handle(_:now:)` (`handleTimeout(now:)` when nothing happened but the deadline passed),
/// then calls `poll()` until it answers nil: every `.capture` before that is to be done now,
/// in order (the owner hands in `.captured` or what else came of it before polling again:
/// the next decision depends on it). Then `nextDeadline()`, the instant the last `poll()`
/// that answered nil decided, is when to come back, unless an input comes first. Pure: no
/// clock reads, time is what `handle` was last given.
public struct CaptureScheduler: SansIO, Sendable {
    public enum Input: Equatable, Sendable {
        /// The source reported a change.
        case changed
        /// A capture meant to read a change found no free slot: the change is still pending (not a new one).
        case changeUnread
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
        /// Whether the encoder is refining a still picture (`StillRefinement.active`): while
        /// it is, a screen that does not change is read at the frame rate, not once per
        /// `refreshInterval`, so that each frame can sharpen it.
        case refining(Bool)
    }

    /// Why a capture is due; `onlyIfChanged` is what to ask the source.
    public enum Reason: Equatable, Sendable {
        /// `refine`: a still screen read again while the encoder refines it (`Input.refining`).
        case changed, keyframe, refresh, refine, probe
        public var onlyIfChanged: Bool { self == .changed || self == .probe }
    }

    public enum Output: Equatable, Sendable {
        /// Read the screen now.
        case capture(Reason)
    }

    /// What `decide` found: a capture now, or nothing before an instant.
    private enum Decision {
        case capture(Reason)
        case wait(until: Instant)
    }

    public private(set) var frameRate: Int
    public let refreshInterval: Duration
    /// Whether to look for unreported changes at the frame rate.
    public let probes: Bool
    /// Whether to phase-lock reads to the change notifications (the owner reports every change,
    /// also while one is pending).
    public let phaseLock: Bool
    private var now: Instant
    /// The last capture that could have produced a frame (not a probe that found nothing).
    private var lastCapture: Instant?
    /// The last frame published: the refresh is due `refreshInterval` after it.
    private var lastFrame: Instant?
    private var lastProbe: Instant?
    private var changed = false
    private var keyframe = false
    /// `Input.refining`: a still screen is read at the frame rate.
    public private(set) var refining = false
    /// `lastCapture` as the last published frame set it (`.nothingChanged` goes back to it).
    private var frameAnchor: Instant?
    // Phase lock.
    /// The newest notification, and the first of the burst it belongs to (notifications less
    /// than `burst` apart are one change: a picture drawn in several requests).
    private var noticeAt: Instant?
    private var changeAt: Instant?
    /// The gaps between the newest changes (at most `gapsKept`), and the source's cadence: their
    /// median, once at least four gaps are there and at least half of them agree with it.
    private var gaps: [Duration] = []
    public private(set) var cadence: Duration?
    /// Waits in a row that ended without the change they waited for.
    private var misses = 0
    /// The current wait for the next change: its end.
    private var holdUntil: Instant?
    /// Since when the pending change or keyframe request has been waiting.
    private var pendingSince: Instant?
    /// How much earlier than due the capture begun next counts (the phase lock's pull), and
    /// the pulls not yet repaid by time (see `takePull`).
    private var pull: Duration = .zero
    private var pullDebt: Duration = .zero
    private var pullDebtAt: Instant?
    /// How much of the minimum interval the capture begun last gives back: how late it began
    /// after it was due (a wait for a fresher change, a late wake-up), at most half an interval.
    private var credit: Duration = .zero
    /// Nothing to do before this instant (unless an input comes first): what the last `poll()`
    /// that answered nil decided.
    private var waitUntil: Instant?

    /// Notifications closer than this are one change.
    public static let burst = Duration.milliseconds(2)
    /// A pending change at most this old is read at once.
    public static let fresh = Duration.milliseconds(2)

    public init(frameRate: Int, now: Instant, refreshInterval: Duration = .milliseconds(900), probes: Bool = false,
                phaseLock: Bool = false) {
        self.frameRate = max(1, frameRate)
        self.refreshInterval = refreshInterval
        self.probes = probes
        self.phaseLock = phaseLock
        self.now = now
    }

    /// The longest wait for the next change: one cadence, at most half the minimum interval. A
    /// wait skips the pending change for the next: free when the source changes faster than
    /// the frame rate, a frame lost when it does not; at a 30 Hz source (out of phase, or a
    /// painter early by a few milliseconds) only a change more than half an interval old is
    /// worth that.
    public var maxHold: Duration { min(cadence ?? .zero, minimumInterval / 2) }

    /// The minimum interval between frames: 10⁹/fps ns, rounded down.
    public var minimumInterval: Duration { .nanoseconds(1_000_000_000 / Int64(frameRate)) }

    public mutating func handle(_ input: Input, now: Instant) {
        // Time never goes back, even if an owner passes an older instant.
        self.now = max(self.now, now)
        switch input {
        case .changed:
            notePending()
            changed = true
            if phaseLock { noteChange() }
        case .changeUnread:
            notePending()
            changed = true
        case .keyframeWanted:
            notePending()
            keyframe = true
        case .frameRate(let fps): if fps > 0 { frameRate = fps }
        case .captured:
            lastCapture = self.now - credit
            frameAnchor = lastCapture
            lastFrame = self.now
            lastProbe = self.now
            credit = .zero
        case .nothingChanged: lastCapture = frameAnchor
        case .refining(let on): refining = on
        }
    }

    /// Only time passed: what is due is decided at the next `poll()` (early or twice, nothing is).
    public mutating func handleTimeout(now: Instant) {
        self.now = max(self.now, now)
    }

    /// Whether a change or a keyframe is waiting for the minimum interval to pass (or, phase
    /// lock, for a fresher change). The owner then has nothing to wait for but the deadline: a
    /// source that keeps saying "changed" until it is read (a PipeWire buffer) would otherwise
    /// wake it at once, again and again. A phase-locked owner keeps listening (its source
    /// reports each change once) and feeds every change in.
    public var pending: Bool { changed || keyframe }

    /// The next capture due now, or nil: then `nextDeadline()` says when to come back.
    public mutating func poll() -> Output? {
        switch decide() {
        case .capture(let reason):
            waitUntil = nil
            return .capture(reason)
        case .wait(let until):
            waitUntil = until
            return nil
        }
    }

    /// The instant the last `poll()` that answered nil decided to come back at.
    public func nextDeadline() -> Instant? { waitUntil }

    /// The next thing to do: a capture due now, or the instant to come back at.
    private mutating func decide() -> Decision {
        let earliest = lastCapture.map { $0 + minimumInterval } ?? now
        if changed || keyframe {
            guard now >= earliest else { return .wait(until: earliest) }
            if !keyframe, let until = hold(earliest: earliest) { return .wait(until: until) }
            let reason: Reason = keyframe ? .keyframe : .changed
            let due = max(earliest, pendingSince ?? now)
            changed = false
            keyframe = false
            pendingSince = nil
            defer { pull = .zero }
            return begin(reason, due: due - pull)
        }
        let refreshAt = max(earliest, lastFrame.map { $0 + (refining ? minimumInterval : refreshInterval) } ?? now)
        if now >= refreshAt { return begin(refining ? .refine : .refresh, due: now) }
        guard probes else { return .wait(until: refreshAt) }
        let probeAt = max(earliest, lastProbe.map { $0 + minimumInterval } ?? now)
        if now >= probeAt {
            // A probe that finds nothing costs a look, not a frame: it does not hold the next change back.
            lastProbe = now
            credit = .zero
            return .capture(.probe)
        }
        return .wait(until: min(refreshAt, probeAt))
    }

    private mutating func notePending() {
        if !changed && !keyframe { pendingSince = now }
    }

    /// A capture due since `due`. The next interval counts from then (see the type's comment),
    /// from the attempt: a capture that yields nothing (every ring slot busy) is retried an
    /// interval later, not in a tight loop.
    private mutating func begin(_ reason: Reason, due: Instant) -> Decision {
        credit = min(max(.zero, now - due), minimumInterval / 2)
        holdUntil = nil
        lastCapture = now - credit
        lastProbe = now
        return .capture(reason)
    }

    /// A notification at `now`: a new change unless it follows the last within `burst`.
    private mutating func noteChange() {
        defer { noticeAt = now }
        if let n = noticeAt, now - n < Self.burst { return }
        if let c = changeAt {
            let g = now - c
            // A pause longer than two intervals: whatever cadence there was has ended.
            if g > minimumInterval * 2 { gaps.removeAll() } else { gaps.append(g) }
            if gaps.count > Self.gapsKept { gaps.removeFirst() }
            cadence = Self.steadyCadence(gaps)
        }
        changeAt = now
    }

    /// How many gaps the cadence is taken from.
    public static let gapsKept = 8

    /// The median gap when the changes are a steady animation: at least four gaps, at least
    /// half of them within a quarter of the median (at least a millisecond) of it. A painter
    /// on a loaded machine is late now and then (the bench's 60 Hz painter: gaps of 13 to 20 ms,
    /// now and then 23 and then 10); the two or three repaints of a keypress are too few.
    static func steadyCadence(_ gaps: [Duration]) -> Duration? {
        guard gaps.count >= 4 else { return nil }
        let median = gaps.sorted()[gaps.count / 2]
        let tolerance = max(.milliseconds(1), median / 4)
        let agreeing = gaps.filter { max($0 - median, median - $0) <= tolerance }.count
        return 2 * agreeing >= gaps.count ? median : nil
    }

    /// Until when to wait for a fresher change than the one pending, or nil to read now.
    private mutating func hold(earliest: Instant) -> Instant? {
        guard phaseLock, let c = changeAt, let n = noticeAt else { return nil }
        // A change at most `fresh` old: read it (the end of a wait, or no need for one).
        if now - n <= Self.fresh {
            if holdUntil != nil { misses = 0 }
            return nil
        }
        if let until = holdUntil {
            if now < until { return until }
            // The change did not come: read what there is; twice in a row, and the cadence is forgotten.
            misses += 1
            if misses >= 2 {
                gaps.removeAll()
                cadence = nil
                misses = 0
            }
            return nil
        }
        // A source faster than the frame rate, or about as fast (a 30 Hz animation read at 30 fps
        // keeps whatever phase it started with: without a wait, every picture as old as the first).
        guard let p = cadence, p < minimumInterval * 3 / 2 else { return nil }
        let next = c + p
        let until = next + max(Self.burst, p / 3)
        guard next - now <= maxHold, now < until else {
            // Too far to wait for without losing a frame. A source about as fast as the frame
            // rate would keep this picture's age for ever (a 30 Hz screen whose changes come a
            // few milliseconds before each interval ends): read it now, and let the next interval
            // end up to `pullStep` earlier, so that the reads walk onto the changes.
            if p >= minimumInterval - Self.pullCadenceTolerance { pull = takePull(min(now - n, Self.pullStep)) }
            return nil
        }
        holdUntil = until
        return until
    }

    /// How much earlier one interval may end to bring the reads onto a source's changes.
    public static let pullStep = Duration.milliseconds(4)
    /// Only a source at most this much faster than the frame rate is pulled onto (a painter's
    /// cadence is the median of its gaps; a faster source drifts across the intervals, and
    /// pulling after it would read it at its own rate).
    public static let pullCadenceTolerance = Duration.milliseconds(1)

    /// `wanted`, or as much of it as the pull budget has: at most half an interval of pulls
    /// in a burst, refilled at half an interval a second, so that no second holds more than
    /// one frame over the rate.
    private mutating func takePull(_ wanted: Duration) -> Duration {
        let budget = minimumInterval / 2
        if let at = pullDebtAt {
            let repaid = Duration.nanoseconds((now - at).totalNanoseconds / 1_000_000
                                              * budget.totalNanoseconds / 1_000)
            pullDebt = max(.zero, pullDebt - repaid)
        }
        pullDebtAt = now
        let granted = max(.zero, min(wanted, budget - pullDebt))
        pullDebt += granted
        return granted
    }
}
