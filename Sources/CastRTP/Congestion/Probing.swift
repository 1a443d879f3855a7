import CastCore

/// A burst of padding the sender should send at `bitsPerSecond` so that the
/// receiver's feedback tells whether the path carries that rate (libwebrtc
/// `ProbeClusterConfig`): at least `minPackets` packets and `minBytes` bytes.
public struct ProbeCluster: Equatable, Sendable {
    public var id: Int
    public var bitsPerSecond: Int64
    public var minPackets: Int
    public var minBytes: Int
    /// Sent right after the cluster before it, paced from its last packet rather than at the
    /// next pacing turn: the second of an application-limited stream's probe pair, which must
    /// find the token bucket the first drained still empty.
    public var followsPrevious = false
}

/// Reads the rate a probe cluster reached from its feedback (libwebrtc
/// `ProbeBitrateEstimator`): the send rate (bytes but the last over the send
/// span) and the receive rate (bytes but the first over the arrival span),
/// once 80 % of the cluster's packets and bytes are acknowledged; spans over
/// 1 s or a receive rate over twice the send rate (packets bunched on the way)
/// are not trusted. (castd had the ratio the other way round until 2026-12-07,
/// and so threw away exactly the readings of a probe far over the link.) When the receive rate
/// is under 90 % of the send rate the path is saturated and 95 % of the
/// receive rate is the answer; otherwise the smaller of the two. A reading is
/// given at each packet from the 80 % on; which of them to keep is
/// `Reading.keeping`.
struct ProbeResultEstimator: Sendable {
    struct Reading: Equatable, Sendable {
        var bitsPerSecond: Double
        /// The path carried less than the cluster was sent at: a reading of its capacity.
        var saturated: Bool

        /// Of this reading and a `later` one of the same cluster, the one to keep: the highest
        /// (a packet held up on the way lowers the readings after it, and is not the link),
        /// but of two saturated readings the later, which covers more of the cluster: a
        /// token bucket passed the first packets at line rate, and the last show the link.
        func keeping(_ later: Reading) -> Reading {
            if saturated, later.saturated { return later }
            return later.bitsPerSecond > bitsPerSecond ? later : self
        }
    }

    static let minReceivedShare = 0.80
    static let maxSpanMs = 1_000.0
    static let maxValidRatio = 2.0
    static let saturatedRatio = 0.90
    static let targetUtilization = 0.95

    struct Cluster {
        var cluster: ProbeCluster
        var firstSend: Instant?, lastSend: Instant?, lastSendSize = 0
        var firstArrivalMs: Double?, lastArrivalMs: Double?, firstArrivalSize = 0
        var bytes = 0, packets = 0
    }
    private var clusters: [Int: Cluster] = [:]

    mutating func started(_ c: ProbeCluster) {
        clusters[c.id] = Cluster(cluster: c)
        if clusters.count > 16, let oldest = clusters.keys.min() { clusters[oldest] = nil }
    }

    /// A probe packet acknowledged; returns the cluster's rate when it can be read.
    mutating func acknowledged(cluster id: Int, sentAt: Instant, size: Int, arrivalMs: Double) -> Reading? {
        guard var c = clusters[id] else { return nil }
        if c.firstSend.map({ sentAt < $0 }) ?? true { c.firstSend = sentAt }
        if c.lastSend.map({ sentAt >= $0 }) ?? true { c.lastSend = sentAt; c.lastSendSize = size }
        if c.firstArrivalMs.map({ arrivalMs < $0 }) ?? true { c.firstArrivalMs = arrivalMs; c.firstArrivalSize = size }
        if c.lastArrivalMs.map({ arrivalMs > $0 }) ?? true { c.lastArrivalMs = arrivalMs }
        c.bytes += size
        c.packets += 1
        clusters[id] = c
        guard Double(c.packets) >= Self.minReceivedShare * Double(c.cluster.minPackets),
              Double(c.bytes) >= Self.minReceivedShare * Double(c.cluster.minBytes),
              let fs = c.firstSend, let ls = c.lastSend, let fa = c.firstArrivalMs, let la = c.lastArrivalMs
        else { return nil }
        let sendMs = Double((ls - fs).totalNanoseconds) / 1e6
        let receiveMs = la - fa
        guard sendMs > 0, receiveMs > 0, sendMs <= Self.maxSpanMs, receiveMs <= Self.maxSpanMs else { return nil }
        let sendRate = Double(c.bytes - c.lastSendSize) * 8000 / sendMs
        let receiveRate = Double(c.bytes - c.firstArrivalSize) * 8000 / receiveMs
        guard receiveRate > 0, receiveRate / sendRate <= Self.maxValidRatio else { return nil }
        if receiveRate < Self.saturatedRatio * sendRate {
            return Reading(bitsPerSecond: Self.targetUtilization * receiveRate, saturated: true)
        }
        return Reading(bitsPerSecond: min(sendRate, receiveRate), saturated: false)
    }
}

/// Application-limited-region detection (libwebrtc `AlrDetector`): a budget
/// fills at 65 % of the target rate and empties by the bytes sent, over a
/// 500 ms window; above 80 % of the window unused the stream is
/// application-limited, below 50 % it is not any more.
struct ApplicationLimitDetector: Sendable {
    static let usageRatio = 0.65
    static let startLevel = 0.80
    static let stopLevel = 0.50
    static let window = 0.5   // seconds

    private var level = 0.0   // bytes; positive = unused budget
    private var last: Instant?
    private(set) var isLimited = false
    private(set) var limitedSince: Instant?
    /// When the stream was last seen application-limited (now, while it is).
    private(set) var lastLimitedAt: Instant?

    mutating func update(sentBytes: Int, target: Double, now: Instant) {
        let dt = last.map { min(max((now - $0).seconds, 0), Self.window) } ?? 0
        last = max(last ?? now, now)   // an earlier `now` adds nothing and does not move the clock back
        let cap = target * Self.usageRatio / 8 * Self.window
        level = min(max(level + target * Self.usageRatio / 8 * dt - Double(sentBytes), -cap), cap)
        let ratio = cap > 0 ? level / cap : 0
        if !isLimited, ratio > Self.startLevel {
            isLimited = true
            limitedSince = now
        } else if isLimited, ratio < Self.stopLevel {
            isLimited = false
            limitedSince = nil
        }
        if isLimited { lastLimitedAt = last }
    }
}
