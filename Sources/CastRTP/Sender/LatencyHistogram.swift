import CastCore

/// How long frames took to reach a point of the send path (issue 19: the latency
/// breakdown after the encoder), as a histogram of quarter-millisecond buckets up
/// to 128 ms and one bucket beyond. A value with fixed memory that the sender
/// records into on every frame and its owner reads as part of the statistics:
/// `since(_:)` gives the window between two readings, so nothing is drained.
public struct LatencyHistogram: Sendable, Equatable {
    /// Bucket width: 250 µs.
    public static let resolution = Duration.microseconds(250)
    /// 512 buckets cover 0–128 ms; one more holds everything longer.
    static let bucketCount = 512

    private var counts: [Int]
    public private(set) var count = 0

    public init() { counts = [Int](repeating: 0, count: Self.bucketCount + 1) }

    /// Counts one duration (a negative one, from clocks of two threads, counts as zero).
    public mutating func record(_ d: Duration) {
        let ns = max(0, d.totalNanoseconds)
        let width = Self.resolution.totalNanoseconds
        counts[Int(min(ns / width, Int64(Self.bucketCount)))] += 1
        count += 1
    }

    /// What was recorded after `earlier` (a reading of this same histogram).
    public func since(_ earlier: LatencyHistogram) -> LatencyHistogram {
        var h = self
        for i in h.counts.indices { h.counts[i] -= earlier.counts[i] }
        h.count -= earlier.count
        return h
    }

    /// The upper edge of the bucket that holds the `q`-quantile (nearest rank), nil when
    /// empty; values past the last bucket read as its lower edge (128 ms).
    public func quantile(_ q: Double) -> Duration? {
        guard count > 0 else { return nil }
        let rank = Int(Double(count - 1) * min(max(q, 0), 1) + 0.5)
        var seen = 0
        for (i, n) in counts.enumerated() {
            seen += n
            if seen > rank { return Self.resolution * min(i + 1, Self.bucketCount) }
        }
        return Self.resolution * Self.bucketCount
    }

    /// "p50/p95" in milliseconds with two decimals (the `stats` log line's form), "-" when empty.
    public var milliseconds: String {
        guard let p50 = quantile(0.5), let p95 = quantile(0.95) else { return "-" }
        return "\(p50.millisecondsText)/\(p95.millisecondsText)"
    }
}
