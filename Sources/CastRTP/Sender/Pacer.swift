import CastCore

/// A leaky-bucket pacer (issue 4 item 7): a keyframe of 100+ packets leaves
/// spread over a few milliseconds instead of in one burst that a switch or
/// Wi-Fi queue would drop. Credit accrues at the pacing rate up to a burst
/// allowance, so a small frame after a pause goes out at once, never delayed.
public struct Pacer<Item: Sendable>: Sendable {
    public struct Configuration: Sendable, Equatable {
        public var bitsPerSecond: Int64
        /// Bytes that may leave back to back when the bucket is full.
        public var burstBytes: Int64

        /// Defaults: 80 Mbit/s and 16 full packets: a 120-packet keyframe
        /// (~140 kB) leaves in about 12 ms, a 10-packet P-frame at once.
        public init(bitsPerSecond: Int64 = 80_000_000, burstBytes: Int64 = 16 * 1200) {
            self.bitsPerSecond = max(8_000, min(bitsPerSecond, 8_000_000_000))
            self.burstBytes = max(1, min(burstBytes, 1_000_000_000))   // keeps credit × 1e9 inside Int64
        }

        var bytesPerSecond: Int64 { bitsPerSecond / 8 }

        /// libwebrtc's pacer (modules/pacing/pacing_controller.h) lets media leave back
        /// to back while its debt, what it sent beyond the pacing rate, stays under what
        /// that rate sends in its burst interval (`kDefaultBurstInterval`, 40 ms), and never
        /// past `kMaxBurstSize` (63,000 bytes, so that a burst fits a socket's send buffer).
        /// castd takes the cap and 30 ms: on the simulated 3 Mbit/s link shared with a
        /// 1.5 Mbit/s flow (CongestionScenarioTests) 40 ms settled on a 60 ms standing
        /// queue where 20–30 ms kept it at 12 ms, and 30 ms still sends a 1080p frame at
        /// 4 Mbit/s (up to 37.5 kB at the 10 Mbit/s pacing rate) at once.
        public static var burstInterval: Duration { .milliseconds(30) }
        public static var maxBurstBytes: Int64 { 63_000 }

        /// The pacer for `bitsPerSecond` with a burst like libwebrtc's (issue 19): a frame that fits
        /// `interval` at the rate (2 full packets at least, `maxBurstBytes` at most) leaves at
        /// once when nothing is queued, instead of over a share of a frame interval, so the
        /// receiver can decode it sooner; a larger one (a keyframe) is paced past that.
        public static func bursting(bitsPerSecond: Int64, interval: Duration = burstInterval,
                                    maxBurstBytes: Int64 = maxBurstBytes) -> Configuration {
            let rate = Configuration(bitsPerSecond: bitsPerSecond, burstBytes: 1).bitsPerSecond   // clamped: no overflow below
            let ns = min(max(interval.totalNanoseconds, 0), 1_000_000_000)
            let perInterval = rate / 8 * ns / 1_000_000_000
            return Configuration(bitsPerSecond: rate, burstBytes: min(max(perInterval, 2 * 1200), max(maxBurstBytes, 1)))
        }
    }

    public var configuration: Configuration
    /// O(1) at both ends (issue 19): a keyframe's 100+ packets leave one by one.
    private var queue = RingBuffer<(item: Item, size: Int)>()
    /// Retransmissions jump the media queue, first come first served among themselves.
    private var urgent = RingBuffer<(item: Item, size: Int)>()
    /// Credit in byte·nanoseconds (bytes × 1e9) so that refills stay exact integers.
    private var credit: Int64
    private var lastRefill: Instant?

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        credit = configuration.burstBytes * 1_000_000_000
    }

    public var queuedCount: Int { urgent.count + queue.count }
    /// Bytes waiting, urgent and not (O(1): the daemon asks before every frame).
    public var queuedBytes: Int { urgentBytes + mediaBytes }
    /// Bytes waiting in the non-urgent (media) queue.
    public private(set) var mediaBytes = 0
    private var urgentBytes = 0

    /// Queues an item of `size` bytes; `urgent` items (retransmissions) go first.
    public mutating func enqueue(_ item: Item, size: Int, urgent: Bool = false) {
        if urgent {
            self.urgent.append((item, size))
            urgentBytes += size
        } else {
            queue.append((item, size))
            mediaBytes += size
        }
    }

    /// The oldest non-urgent item, if any.
    public var firstQueued: Item? { queue.first?.item }

    /// The first non-urgent item after the oldest that `predicate` picks, if any (a scan
    /// from the front: callers stop it at the next frame's start).
    public func queued(afterFirst predicate: (Item) -> Bool) -> Item? {
        queue.dropFirst().first { predicate($0.item) }?.item
    }

    /// Removes non-urgent items from the front while `predicate` holds; returns them.
    public mutating func dropQueued(while predicate: (Item) -> Bool) -> [Item] {
        var out: [Item] = []
        while let e = queue.first, predicate(e.item) {
            mediaBytes -= e.size
            out.append(e.item)
            queue.popFirst()
        }
        return out
    }

    private mutating func refill(_ now: Instant) {
        defer { lastRefill = now }
        guard let last = lastRefill, now > last else { return }
        let elapsed = min((now - last).totalNanoseconds, 1_000_000_000)   // caps the product below Int64.max
        credit = min(credit + elapsed * configuration.bytesPerSecond, configuration.burstBytes * 1_000_000_000)
    }

    /// The items that may leave at `now`: while credit is positive, one more
    /// packet goes (credit may then go negative and is paid back over time).
    public mutating func poll(now: Instant) -> [Item] {
        var out: [Item] = []
        while let item = next(now: now) { out.append(item) }
        return out
    }

    /// The next item that may leave at `now`, urgent ones first; nil when none may.
    /// Calling it until nil is `poll(now:)` without the array.
    public mutating func next(now: Instant) -> Item? {
        refill(now)
        guard credit > 0 else { return nil }
        if let e = urgent.popFirst() {
            credit -= Int64(e.size) * 1_000_000_000
            urgentBytes -= e.size
            return e.item
        }
        if let e = queue.popFirst() {
            mediaBytes -= e.size
            credit -= Int64(e.size) * 1_000_000_000
            return e.item
        }
        return nil
    }

    /// When the next queued item may leave; nil with nothing queued.
    public var nextDeadline: Instant? {
        guard queuedCount > 0, let last = lastRefill else { return nil }
        if credit > 0 { return last }
        let deficit = -credit + 1
        let bps = configuration.bytesPerSecond
        return last + .nanoseconds((deficit + bps - 1) / bps)
    }
}
