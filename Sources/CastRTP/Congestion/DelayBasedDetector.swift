import CastCore

/// What the delay-based detector makes of the queue (draft-ietf-rmcat-gcc-02 §5.5).
public enum BandwidthUsage: String, Equatable, Sendable {
    case normal, overusing, underusing
}

/// The delay-based half of GCC: packets are grouped by send time, the change in
/// one-way delay between groups is smoothed and its trend over the last 20
/// groups is compared with an adaptive threshold (draft-ietf-rmcat-gcc-02 §5.2–§5.5;
/// libwebrtc's `InterArrivalDelta`, `TrendlineEstimator`). Times are in
/// milliseconds as `Double`, as in the draft's equations.
/// Pure state: every input carries its times; nothing is read from a clock.
struct DelayBasedDetector: Sendable {
    /// Packets sent within 5 ms of a group's first packet belong to that group
    /// (gcc-02 §5.2 burst_time; libwebrtc kSendTimeGroupLength).
    static let groupSendSpan = 5.0
    /// A receiver clock that jumps by more than this between groups resets the
    /// state (libwebrtc InterArrivalDelta kArrivalTimeOffsetThreshold: 3 s).
    static let arrivalJumpLimit = 3_000.0
    /// Trendline: window of 20 groups, smoothing 0.9, gain 4 (libwebrtc
    /// TrendlineEstimator kDefaultTrendlineWindowSize, SmoothingCoef, ThresholdGain).
    static let window = 20
    static let smoothing = 0.9
    static let gain = 4.0
    /// The trend is scaled by the number of deltas seen, at most 60 (libwebrtc
    /// TrendlineEstimator: `min(num_of_deltas, kMinNumDeltas = 60)`).
    static let maxDeltas = 60.0
    /// Adaptive threshold γ (gcc-02 §5.4): k_u = 0.0087, k_d = 0.039, clamped to
    /// 6…600 ms, starting at 12.5 ms; samples beyond γ + 15 ms do not move it
    /// (libwebrtc kMaxAdaptOffsetMs); the time step is capped at 100 ms.
    static let kUp = 0.0087
    static let kDown = 0.039
    static let thresholdRange = 6.0...600.0
    static let initialThreshold = 12.5
    static let maxAdaptOffset = 15.0
    /// Over-use needs the signal above γ for 10 ms and more than one group
    /// (gcc-02 §5.5 overuse_time_th; libwebrtc kOverUsingTimeThreshold).
    static let overuseTime = 10.0

    struct Group {
        var firstSend: Double
        var lastSend: Double
        var firstArrival: Double
        var lastArrival: Double
        var size: Int
    }

    private var current: Group?
    private var previous: Group?
    // Trendline state.
    private var firstArrival: Double?
    private var accumulatedDelay = 0.0
    private var smoothedDelay = 0.0
    private var samples: [(x: Double, y: Double)] = []
    private var deltas = 0
    private var previousTrend = 0.0
    // Threshold and detector state.
    private(set) var threshold = initialThreshold
    private var lastThresholdUpdate: Double?
    private var overuseTimer: Double?
    private var overuseCount = 0
    private(set) var state = BandwidthUsage.normal
    /// The last modified trend (ms), for tests and statistics.
    private(set) var modifiedTrend = 0.0

    /// One received packet, in the order the feedback reports arrivals. Returns
    /// the usage after it (unchanged until a group completes).
    mutating func packet(sendMs: Double, arrivalMs: Double, size: Int) -> BandwidthUsage {
        guard var g = current else {
            current = Group(firstSend: sendMs, lastSend: sendMs, firstArrival: arrivalMs, lastArrival: arrivalMs, size: size)
            return state
        }
        // A packet sent before the current group started arrived reordered: skip it (libwebrtc does).
        if sendMs < g.firstSend { return state }
        if sendMs - g.firstSend <= Self.groupSendSpan {
            g.lastSend = max(g.lastSend, sendMs)
            g.lastArrival = max(g.lastArrival, arrivalMs)
            g.size += size
            current = g
            return state
        }
        // A new group starts: compare the completed one with its predecessor.
        if let p = previous {
            let sendDelta = g.lastSend - p.lastSend
            let arrivalDelta = g.lastArrival - p.lastArrival
            if arrivalDelta - sendDelta > Self.arrivalJumpLimit || arrivalDelta < -Self.arrivalJumpLimit {
                // The receiver's clock jumped (or its reference time wrapped oddly): start over.
                resetAfterClockJump()
                current = Group(firstSend: sendMs, lastSend: sendMs, firstArrival: arrivalMs, lastArrival: arrivalMs, size: size)
                return state
            }
            if arrivalDelta >= 0 {
                update(delayDelta: arrivalDelta - sendDelta, sendDelta: sendDelta, arrivalMs: g.lastArrival)
            }
        }
        previous = g
        current = Group(firstSend: sendMs, lastSend: sendMs, firstArrival: arrivalMs, lastArrival: arrivalMs, size: size)
        return state
    }

    private mutating func resetAfterClockJump() {
        previous = nil
        firstArrival = nil
        accumulatedDelay = 0
        smoothedDelay = 0
        samples.removeAll()
        deltas = 0
        overuseTimer = nil
        overuseCount = 0
        lastThresholdUpdate = nil
        state = .normal
    }

    /// gcc-02 §5.3 (as libwebrtc's trendline replaces the Kalman filter): the
    /// slope of the smoothed accumulated delay over arrival time.
    private mutating func update(delayDelta: Double, sendDelta: Double, arrivalMs: Double) {
        deltas = min(deltas + 1, 1000)
        let origin = firstArrival ?? arrivalMs
        firstArrival = origin
        accumulatedDelay += delayDelta
        smoothedDelay = Self.smoothing * smoothedDelay + (1 - Self.smoothing) * accumulatedDelay
        samples.append((arrivalMs - origin, smoothedDelay))
        if samples.count > Self.window { samples.removeFirst() }
        var trend = previousTrend
        if samples.count == Self.window, let slope = Self.slope(samples) { trend = slope }
        detect(trend: trend, sendDelta: sendDelta, nowMs: arrivalMs)
    }

    /// Least-squares slope; nil when all x are equal.
    static func slope(_ points: [(x: Double, y: Double)]) -> Double? {
        let n = Double(points.count)
        let mx = points.reduce(0) { $0 + $1.x } / n
        let my = points.reduce(0) { $0 + $1.y } / n
        var num = 0.0, den = 0.0
        for p in points {
            num += (p.x - mx) * (p.y - my)
            den += (p.x - mx) * (p.x - mx)
        }
        return den == 0 ? nil : num / den
    }

    private mutating func detect(trend: Double, sendDelta: Double, nowMs: Double) {
        let t = min(Double(deltas), Self.maxDeltas) * trend * Self.gain
        modifiedTrend = t
        if t > threshold {
            // The first sample above γ counts half its interval (libwebrtc does the same).
            if let timer = overuseTimer { overuseTimer = timer + sendDelta } else { overuseTimer = sendDelta / 2 }
            overuseCount += 1
            if let timer = overuseTimer, timer > Self.overuseTime, overuseCount > 1, trend >= previousTrend {
                overuseTimer = 0
                overuseCount = 0
                state = .overusing
            }
        } else if t < -threshold {
            overuseTimer = nil
            overuseCount = 0
            state = .underusing
        } else {
            overuseTimer = nil
            overuseCount = 0
            state = .normal
        }
        previousTrend = trend
        adaptThreshold(t, nowMs: nowMs)
    }

    private mutating func adaptThreshold(_ t: Double, nowMs: Double) {
        let last = lastThresholdUpdate ?? nowMs
        lastThresholdUpdate = nowMs
        guard abs(t) <= threshold + Self.maxAdaptOffset else { return }
        let k = abs(t) < threshold ? Self.kDown : Self.kUp
        let dt = min(max(nowMs - last, 0), 100)
        threshold += k * (abs(t) - threshold) * dt
        threshold = min(max(threshold, Self.thresholdRange.lowerBound), Self.thresholdRange.upperBound)
    }
}
