import CastCore

/// How long one stage of the media path took, per frame, since the last
/// report: the capture pipeline records a duration per frame and stage, and
/// the daemon's `stats` log line drains a summary every few seconds. Keeps at
/// most `capacity` recent samples (older ones still count in `count` and
/// `max`), so memory stays fixed however long the window.
public struct StageTimes: Sendable, Equatable {
    public struct Summary: Sendable, Equatable {
        public var count: Int
        public var p50: Duration
        public var p95: Duration
        public var max: Duration

        /// "p50/p95/max" in milliseconds with two decimals, for key=value log fields.
        public var milliseconds: String {
            "\(p50.millisecondsText)/\(p95.millisecondsText)/\(max.millisecondsText)"
        }
    }

    public let capacity: Int
    private var samples: [Duration] = []
    private var next = 0
    private var count = 0
    private var longest = Duration.zero

    public init(capacity: Int = 512) {
        precondition(capacity > 0)
        self.capacity = capacity
    }

    public mutating func record(_ d: Duration) {
        count += 1
        longest = Swift.max(longest, d)
        if samples.count < capacity {
            samples.append(d)
        } else {
            samples[next] = d
            next = (next + 1) % capacity
        }
    }

    /// The summary since the last drain (nil when nothing was recorded), and a fresh window.
    public mutating func drain() -> Summary? {
        guard count > 0 else { return nil }
        let sorted = samples.sorted()
        func at(_ q: Double) -> Duration { sorted[Swift.min(sorted.count - 1, Int(Double(sorted.count - 1) * q + 0.5))] }
        let s = Summary(count: count, p50: at(0.5), p95: at(0.95), max: longest)
        self = StageTimes(capacity: capacity)
        return s
    }
}
