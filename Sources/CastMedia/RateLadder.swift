import CastCore

/// How the media side answers the congestion controller's target bitrate
/// (issue 14): the resolution is kept (spec §7 `maintainResolution`), so a
/// lower rate is met first by a higher QP (the encoder's CBR does that by
/// itself) and, below per-rate thresholds, by a lower frame rate: 30 → 20 →
/// 15 → 10 → 5 fps. Fewer, sharper frames read better for desktop text than
/// many blurred ones, which is why screen-sharing senders (Chrome's
/// "detail" content hint) give up frame rate before resolution too.
///
/// Thresholds are stated for 1080p and scale with the pixel count to the
/// power 0.75 (bits per pixel needed fall as pictures grow; the usual
/// rule of thumb for H.264 rate ladders). At 1080p a frame rate `f` is chosen
/// while the target gives each frame at least about 60–87 kbit (8–11 KB):
/// 30 fps from 2.6 Mbit/s, 20 from 1.5, 15 from 1.1, 10 from 0.6. A 2 Mbit/s
/// tbf link (≈ 1.5–2.2 Mbit/s of target) then runs at 15–20 fps. (15 fps from
/// 1.1 Mbit/s: at 1.3 the target of a 2 Mbit/s tbf link hovered at the edge
/// and the cast spent much of its time at 10 fps; 20 from 1.5, not 1.9, which
/// gave 20 fps 95 kbit frames against 15 fps's 73 and kept that link at
/// 14.8–15.0 fps.)
///
/// Down-steps follow the target at once (a frame that the link cannot carry
/// only queues); up-steps need the target to clear a higher threshold by
/// `upMargin` for `upHold`, so an estimate that wobbles around a threshold
/// does not make the frame rate flap, and then go straight to the highest
/// step so cleared (one step per hold took 6 s from 10 to 30 fps after the
/// start-up probes had found 4 Mbit/s within a second). The controller's start
/// rate counts like any target: holding 30 fps at it for 1.5 s was tried and
/// gave the first key frame a third of the bits (x264's one-frame VBV at 30
/// instead of 10 fps: 4 KB at 1 Mbit/s and 1080p); the colour bars then
/// arrived 21 levels off through a relay, where nothing raised the rate in
/// the test's few seconds.
///
/// Start-up (`startUpWindow`, 3 s from the first target): the controller's start
/// rate (1 Mbit/s, 10 fps at 1080p) is a guess, and its start-up probes replace
/// it with a measurement within the first second; holding that measurement for
/// `upHold` as if it were a wobble kept every cast at 10 fps for its first 2–2.5 s
/// (the bench's 1080p busy row, aiortc receiver on loopback: 10 fps for 2 s,
/// 30 fps from the third second). In the window an up-step needs the margin but
/// no hold; down-steps are immediate as always, and after the window the hold
/// applies again.
///
/// A picture that does not fill its target (its encoder sends at most
/// `unconstrainedShare` of it) keeps its step and climbs to the highest one it
/// fits (`fittingFrameRate`): the thresholds are for a busy picture, and a
/// cheaper one held at their step reads as application-limited to the
/// congestion controller, whose estimate then cannot grow.
///
/// An encoder that cannot meet its target at all (libvpx at its coarsest
/// quantizer on a busy 1080p screen sends 8 Mbit/s against 4) would break the
/// caps on a link with room to spare, where nothing lowers the target: so an
/// output above `overshootRatio` × the bitrate asked for, for `overshootHold`,
/// steps the frame rate down to the step where that output, scaled by the
/// frame rate, would fit, and that step is a ceiling for a while
/// (`overshootBackoff`, doubling while the encoder keeps overshooting after
/// each retry, up to 64 s), as libwebrtc's encoder-overshoot handling gives up
/// frames rather than bits.
/// Pure: time is passed in.
public struct RateLadder: Sendable {
    public struct Step: Equatable, Sendable {
        public var frameRate: Int
        /// The lowest target (bit/s, at 1080p) at which this frame rate is used.
        public var minimumBitrate1080p: Int
        public init(frameRate: Int, minimumBitrate1080p: Int) {
            self.frameRate = frameRate
            self.minimumBitrate1080p = minimumBitrate1080p
        }
    }

    public struct Decision: Equatable, Sendable {
        /// What the encoder should aim at (bit/s): the target, within the caps.
        public var bitrate: Int
        public var frameRate: Int
        public init(bitrate: Int, frameRate: Int) {
            self.bitrate = bitrate
            self.frameRate = frameRate
        }
    }

    /// Ascending frame rates; the first step applies below every threshold.
    public static let standardSteps: [Step] = [
        Step(frameRate: 5, minimumBitrate1080p: 0),
        Step(frameRate: 10, minimumBitrate1080p: 600_000),
        Step(frameRate: 15, minimumBitrate1080p: 1_100_000),
        Step(frameRate: 20, minimumBitrate1080p: 1_500_000),
        Step(frameRate: 30, minimumBitrate1080p: 2_600_000),
    ]

    public let size: FrameSize
    /// The receiver's (spec §5) or the caps' frame rate: never exceeded.
    public let maxFrameRate: Int
    /// The caps' bitrate for this size (spec §7: 4 Mbit/s at 1080p, 2.5 at 720p): never exceeded.
    public let maxBitrate: Int
    /// The floor below which the encoder is not asked to go (x264 needs some bits to stay sane).
    public let minBitrate: Int
    public let upMargin: Double
    public let upHold: Duration
    /// From the first target, how long up-steps need no hold (see the type's comment).
    public let startUpWindow: Duration
    /// When the first target came: the start-up window counts from it.
    private var firstTargetAt: Instant?
    private let thresholds: [(frameRate: Int, minimum: Int)]
    public private(set) var current: Decision
    private var upCandidateSince: Instant?
    /// The encoder's output above this share of the bitrate asked for counts as overshoot.
    public static let overshootRatio = 1.3
    /// How long the overshoot must last (longer than one key frame's share of the 1 s window).
    public static let overshootHold = Duration.seconds(2)
    static let overshootBackoffStart = Duration.seconds(8)
    static let overshootBackoffMax = Duration.seconds(64)
    private var overshootSince: Instant?
    /// While set: the frame rate may not rise above `fps` before `until`.
    private var overshootCeiling: (fps: Int, until: Instant)?
    private var overshootBackoff = RateLadder.overshootBackoffStart
    private var ceilingEnded: Instant?

    public init(size: FrameSize, maxFrameRate: Int, maxBitrate: Int, minBitrate: Int = 100_000,
                steps: [Step] = RateLadder.standardSteps, upMargin: Double = 0.15, upHold: Duration = .seconds(2),
                startUpWindow: Duration = .seconds(3)) {
        self.size = size
        let maxFPS = max(1, maxFrameRate)
        self.maxFrameRate = maxFPS
        self.maxBitrate = max(minBitrate, maxBitrate)
        self.minBitrate = max(1, minBitrate)
        self.upMargin = max(0, upMargin)
        self.upHold = upHold
        self.startUpWindow = max(.zero, startUpWindow)
        let scale = Self.scale(for: size)
        var t = steps.filter { $0.frameRate <= maxFPS }
            .sorted { $0.frameRate < $1.frameRate }
            .map { (frameRate: $0.frameRate, minimum: Int(Double($0.minimumBitrate1080p) * scale)) }
        // The receiver's own rate (e.g. 24) is a step of its own when no standard one equals it.
        if t.last?.frameRate != maxFPS {
            let top = steps.filter { $0.frameRate > maxFPS }.map(\.minimumBitrate1080p).min()
            t.append((frameRate: maxFPS, minimum: top.map { Int(Double($0) * scale) } ?? (t.last?.minimum ?? 0)))
        }
        if t.isEmpty { t = [(frameRate: maxFPS, minimum: 0)] }
        t[0].minimum = 0
        thresholds = t
        // Until the first estimate: the caps (the controller starts low and probes up; the
        // first target arrives within a few hundred milliseconds of the first feedback).
        current = Decision(bitrate: self.maxBitrate, frameRate: t.last!.frameRate)
    }

    /// A demand at most this share of the target counts as sparse (room for its bursts).
    static let sparseShare = 0.7
    /// An output at most this share of the bitrate asked for is the picture's own demand, not
    /// the encoder's rate control filling the target (a CBR encoder meets any target with a
    /// busy picture); only then is it scaled to other frame rates (`fittingFrameRate`).
    static let unconstrainedShare = 0.9
    /// A higher step whose scaled demand is at most this share of the target fits it.
    static let fittingShare = 0.8

    /// Pixel-count scaling of the 1080p thresholds: (pixels / 1080p pixels)^0.75.
    static func scale(for size: FrameSize) -> Double {
        let ratio = Double(max(1, size.width * size.height)) / Double(1920 * 1080)
        return pow075(ratio)
    }

    /// x^0.75 without Foundation (sqrt(x) · sqrt(sqrt(x))), for x > 0.
    private static func pow075(_ x: Double) -> Double {
        let r = x.squareRoot()
        return r * r.squareRoot()
    }

    /// The step an overshooting encoder goes to: the highest below `fps` at which its output,
    /// scaled by the frame rate, would fit the bitrate (frames grow as they get further apart,
    /// so this is a first guess that a further step may correct), else the lowest.
    private func overshootStep(below fps: Int, output: Int, bitrate: Int) -> Int? {
        let lower = thresholds.filter { $0.frameRate < fps }
        guard let lowest = lower.first else { return nil }
        let fits = lower.last { Double(output) * Double($0.frameRate) / Double(max(1, fps)) <= Double(bitrate) }
        return (fits ?? lowest).frameRate
    }

    /// The highest step above `current`'s frame rate at which a picture whose encoder is not
    /// held back by its target (output at most `unconstrainedShare` of it) would still need at
    /// most `fittingShare` of the target, its output scaled by the frame rate; nil when none
    /// or when the output fills the target. The thresholds are for a picture that fills any
    /// target; a cheaper one held at their step (a slide deck with small changes: 4 KB frames,
    /// 160 kbit/s at 5 fps under a 400 kbit/s target) sends under 65 % of the target, the
    /// controller reads the stream as application-limited and may not climb past 1.5 × what
    /// it acknowledges, so the cast stays at the low step after the link has come back (the
    /// meeting row: 10 fps for minutes on a 3 Mbit/s link under a 0.95 Mbit/s target).
    func fittingFrameRate(bitrate: Int, output: Int?) -> Int? {
        guard let out = output, Self.isUnconstrained(output: out, bitrate: bitrate) else { return nil }
        let fps = max(1, current.frameRate)
        return thresholds.last {
            $0.frameRate > fps && Double(out) * Double($0.frameRate) / Double(fps) <= Self.fittingShare * Double(bitrate)
        }?.frameRate
    }

    /// Whether an encoder's output is the picture's own demand (`unconstrainedShare`).
    static func isUnconstrained(output: Int, bitrate: Int) -> Bool {
        Double(output) <= unconstrainedShare * Double(bitrate)
    }

    /// The frame rate for a target, without hysteresis.
    func frameRate(for bitrate: Int) -> Int {
        thresholds.last { bitrate >= $0.minimum }?.frameRate ?? thresholds[0].frameRate
    }

    /// A new target from the congestion controller. Returns the decision when it changed.
    /// `outputBitrate`: the encoder's measured output over the last second, at the current
    /// frame rate. Scaled to the top frame rate it is the picture's demand: a picture that
    /// needs well under the target (a still or sparse screen: 30–300 kbit/s) keeps the top
    /// frame rate whatever the thresholds say (fewer frames would save nothing; only content
    /// that fills the target trades frame rate for quality). Well above the bitrate asked
    /// for, for `overshootHold`, it steps the frame rate down (see the type's comment).
    public mutating func update(targetBitrate: Int, outputBitrate: Int? = nil, now: Instant) -> Decision? {
        let bitrate = min(maxBitrate, max(minBitrate, targetBitrate))
        let first = firstTargetAt ?? now
        firstTargetAt = first
        let startingUp = now - first < startUpWindow
        var plain = frameRate(for: bitrate)
        let demand = outputBitrate.map { $0 * maxFrameRate / max(1, current.frameRate) }
        let sparse = demand.map { Double($0) <= Self.sparseShare * Double(bitrate) } ?? false
        if sparse { plain = thresholds.last!.frameRate }
        // A picture that the encoder meets under the target keeps its step, and a higher one
        // that it fits (see `fittingFrameRate`) is an up-step like any other.
        let unconstrained = outputBitrate.map { Self.isUnconstrained(output: $0, bitrate: bitrate) } ?? false
        let fitting = fittingFrameRate(bitrate: bitrate, output: outputBitrate)
        if unconstrained { plain = max(plain, current.frameRate) }
        if let f = fitting { plain = max(plain, f) }
        var fps = current.frameRate
        if let ceiling = overshootCeiling {
            if now >= ceiling.until {
                overshootCeiling = nil
                ceilingEnded = now
            } else {
                plain = min(plain, ceiling.fps)
            }
        }
        if let out = outputBitrate, Double(out) > Self.overshootRatio * Double(current.bitrate),
           let lower = overshootStep(below: fps, output: out, bitrate: current.bitrate) {
            let since = overshootSince ?? now
            overshootSince = since
            if now - since >= Self.overshootHold {
                // A retry that overshoots again soon after its ceiling ended waits twice as long;
                // further steps of one descent (a ceiling still in force) keep the wait.
                if overshootCeiling == nil {
                    if let ended = ceilingEnded, now - ended <= overshootBackoff * 2 {
                        overshootBackoff = min(Self.overshootBackoffMax, overshootBackoff * 2)
                    } else {
                        overshootBackoff = Self.overshootBackoffStart
                    }
                }
                overshootSince = nil
                overshootCeiling = (fps: lower, until: now + overshootBackoff)
                plain = min(plain, lower)
            }
        } else {
            overshootSince = nil
        }
        if plain < fps {
            fps = plain
            upCandidateSince = nil
        } else if plain > fps {
            // Up once the target clears a higher step's threshold by the margin for upHold (at once
            // in the start-up window): to the highest step it clears so (a sparse picture: the top one).
            let byThreshold = sparse ? thresholds.last!.frameRate
                : thresholds.last { $0.frameRate > fps && Double(bitrate) >= Double($0.minimum) * (1 + upMargin) }?.frameRate
            let cleared = [byThreshold, fitting].compactMap { $0 }.max()
            if let up = cleared {
                if startingUp {
                    fps = up
                    upCandidateSince = nil
                } else if let since = upCandidateSince {
                    if now - since >= upHold {
                        fps = up
                        upCandidateSince = nil
                    }
                } else {
                    upCandidateSince = now
                }
            } else {
                upCandidateSince = nil
            }
        } else {
            upCandidateSince = nil
        }
        let decision = Decision(bitrate: bitrate, frameRate: fps)
        guard decision != current else { return nil }
        // Small bitrate changes are not worth an encoder reconfiguration (x264 resets its
        // VBV state on reconfig): only a frame-rate change or a move of ≥ 5 % goes through.
        if decision.frameRate == current.frameRate,
           abs(decision.bitrate - current.bitrate) * 20 < current.bitrate { return nil }
        current = decision
        return decision
    }
}
