import CastCore

/// Bytes sent over the last `length` (a sliding window), for rate budgets:
/// O(1) amortised per sample, pruned as time passes.
public struct RateWindow: Sendable {
    public let length: Duration
    private var samples: [(at: Instant, bytes: Int)] = []
    private var head = 0
    public private(set) var bytes = 0

    public init(length: Duration) { self.length = length }

    public mutating func add(_ n: Int, now: Instant) {
        prune(now: now)
        samples.append((now, n))
        bytes += n
    }

    /// Bytes in the window ending at `now`.
    public mutating func bytes(now: Instant) -> Int {
        prune(now: now)
        return bytes
    }

    /// Samples and bytes in the window ending at `now`, without pruning (for read-only callers).
    public func totals(at now: Instant) -> (samples: Int, bytes: Int) {
        var first = head, b = bytes
        while first < samples.count, now - samples[first].at >= length {
            b -= samples[first].bytes
            first += 1
        }
        return (samples.count - first, b)
    }

    /// The window's rate in bits per second at `now`.
    public mutating func bitsPerSecond(now: Instant) -> Int64 {
        Int64(bytes(now: now)) * 8 * 1_000_000_000 / max(length.totalNanoseconds, 1)
    }

    private mutating func prune(now: Instant) {
        while head < samples.count, now - samples[head].at >= length {
            bytes -= samples[head].bytes
            head += 1
        }
        if head == samples.count {
            samples.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 256, head * 2 > samples.count {
            samples.removeFirst(head)
            head = 0
        }
    }
}
