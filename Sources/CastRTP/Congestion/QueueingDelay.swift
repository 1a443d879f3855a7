import CastCore

/// The bottleneck's standing queue as transport-cc shows it: each packet's
/// one-way delay (arrival on the receiver's clock less its send time; the
/// clocks' offset cancels out) less the least one seen over the last 10 s,
/// which is the path without a queue (LEDBAT's base delay, RFC 6817 §2.4.1;
/// BBR's windowed minimum). The minimum is kept per second, so a path that
/// got longer is forgotten after 10 s instead of reading as a queue forever.
struct QueueingDelay: Sendable {
    static let baseWindowSeconds = 10

    /// The least one-way delay (ms) of each of the last `baseWindowSeconds` seconds, by second.
    private var minima: [(second: Int64, delay: Double)] = []
    /// The queueing delay of the latest-sent packet reported, in milliseconds.
    private(set) var current: Double?
    private var latestSend: Instant?

    /// A packet sent at `sentAt` arrived at `arrivalMs` on the receiver's clock.
    mutating func arrived(sentAt: Instant, arrivalMs: Double) {
        let delay = arrivalMs - Double(sentAt.nanoseconds) / 1e6
        guard delay.isFinite else { return }
        let second = sentAt.nanoseconds / 1_000_000_000
        if let last = minima.last, last.second == second {
            minima[minima.count - 1].delay = min(last.delay, delay)
        } else {
            minima.append((second, delay))
            minima.removeAll { second - $0.second >= Int64(Self.baseWindowSeconds) }
        }
        guard latestSend.map({ sentAt >= $0 }) ?? true else { return }
        latestSend = sentAt
        let base = minima.reduce(delay) { min($0, $1.delay) }
        current = delay - base
    }
}
