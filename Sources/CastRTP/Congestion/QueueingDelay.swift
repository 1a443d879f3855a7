import CastCore

/// The bottleneck's standing queue as transport-cc shows it: each packet's
/// one-way delay (arrival on the receiver's clock less its send time; the
/// clocks' offset cancels out) less the least one seen over the last 10 s,
/// which is the path without a queue (LEDBAT's base delay, RFC 6817 §2.4.1;
/// BBR's windowed minimum). The minimum is kept per second, so a path that
/// got longer is forgotten after 10 s instead of reading as a queue forever.
///
/// `takeLeastStanding()` reads the delay above the least of the last minute: a queue another
/// flow keeps full for longer than 10 s (a bulk TCP download) becomes the 10 s base, and only
/// the longer memory still reads it as a queue.
struct QueueingDelay: Sendable {
    static let baseWindowSeconds = 10
    static let longWindowSeconds = 60

    /// The least one-way delay (ms) of each of the last `baseWindowSeconds` seconds, by second.
    private var minima: [(second: Int64, delay: Double)] = []
    /// The queueing delay of the latest-sent packet reported, in milliseconds.
    private(set) var current: Double?
    /// The least one-way delay of each 10 s of the last `longWindowSeconds`.
    private var longMinima: [(tenSeconds: Int64, delay: Double)] = []
    /// The least delay above the last minute's least one (ms) of the packets since
    /// `takeLeastStanding()` was last called: a queue of our own frames empties between them, so
    /// the first packet of a frame finds none; one another flow holds delays every packet.
    private var leastStanding: Double?
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
        let tens = second / 10
        if let last = longMinima.last, last.tenSeconds == tens {
            longMinima[longMinima.count - 1].delay = min(last.delay, delay)
        } else {
            longMinima.append((tens, delay))
            longMinima.removeAll { tens - $0.tenSeconds >= Int64(Self.longWindowSeconds / 10) }
        }
        let aboveLongBase = delay - longMinima.reduce(delay) { min($0, $1.delay) }
        leastStanding = min(leastStanding ?? aboveLongBase, aboveLongBase)
        guard latestSend.map({ sentAt >= $0 }) ?? true else { return }
        latestSend = sentAt
        let base = minima.reduce(delay) { min($0, $1.delay) }
        current = delay - base
    }

    /// The least delay above the last minute's base of the packets since the last call (nil: none).
    mutating func takeLeastStanding() -> Double? {
        defer { leastStanding = nil }
        return leastStanding
    }
}
