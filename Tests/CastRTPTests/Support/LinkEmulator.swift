import CastCore
@testable import CastRTP

/// One direction of a network path on the fake clock (str0m's netem, in
/// small): a bottleneck of `bitsPerSecond` (changeable at any time) with a
/// drop-tail buffer, a one-way delay, jitter, random and burst (Gilbert)
/// loss, and constant-rate cross traffic sharing the buffer. Packets leave
/// the bottleneck in order; jitter is added after it (so it may reorder).
struct LinkEmulator {
    var bitsPerSecond: Int64
    /// The buffer in front of the bottleneck, as time at the current rate (tbf's `latency`).
    var buffer: Duration
    var delay: Duration
    var jitter: Duration = .zero
    /// Jitter that keeps the order, as Scripts/faults' router does (and a real queue): a packet
    /// never leaves before the one sent before it, so one delayed packet holds the next ones back
    /// and they arrive together.
    var jitterKeepsOrder = false
    var randomLoss = 0.0
    /// Gilbert model: probability of entering the bad state per packet, and of leaving it; all lost while bad.
    var burstLoss: (enter: Double, leave: Double)?
    var crossTrafficBitsPerSecond: Int64 = 0
    /// Bytes each packet costs on the bottleneck beyond what it carries (28: the IPv4 and UDP
    /// headers a tbf on the fault router's tun device counts, which castd's own sizes leave out).
    var perPacketOverhead = 0
    /// A token bucket of this many bytes in front of the rate, as tc tbf's `burst`: after a quiet
    /// spell up to this much passes at once, at line rate. 0: a plain serialising bottleneck.
    var bucketBytes = 0

    private(set) var inFlight: [(at: Instant, bytes: [UInt8])] = []
    /// When the bottleneck has finished sending what it holds.
    private var busyUntil = Instant.zero
    private var crossCheckedAt: Instant?
    private var bad = false
    var random: SeededRandom

    private(set) var packetsIn = 0
    private(set) var droppedByBuffer = 0
    private(set) var droppedByLoss = 0
    /// Queueing delay each of our packets met (time waiting for the bottleneck), by send time.
    private(set) var queueDelays: [(at: Instant, delay: Duration)] = []

    init(bitsPerSecond: Int64, buffer: Duration = .milliseconds(200), delay: Duration, seed: UInt64 = 1) {
        self.bitsPerSecond = bitsPerSecond
        self.buffer = buffer
        self.delay = delay
        random = SeededRandom(seed: seed)
    }

    private mutating func chance(_ p: Double) -> Bool { p > 0 && Double(random.next() % 1_000_000) < p * 1_000_000 }

    private func serialization(_ bytes: Int) -> Duration {
        .nanoseconds(Int64(bytes) * 8_000_000_000 / max(bitsPerSecond, 1))
    }

    /// Offers the bottleneck `bytes` at `now`; returns whether it was queued.
    @discardableResult
    private mutating func enqueue(_ bytes: Int, now: Instant) -> Instant? {
        let wire = bytes + perPacketOverhead
        if bucketBytes > 0 {
            let departs = bucketDeparture(wire, now: now)
            if departs - now > buffer { return nil }
            busyUntil = max(busyUntil, departs) + serialization(wire)
            return departs
        }
        let start = max(busyUntil, now)
        // Drop-tail: the backlog after this packet may not exceed the buffer.
        if start - now + serialization(wire) > buffer { return nil }
        busyUntil = start + serialization(wire)
        return busyUntil
    }

    /// tbf: a packet of `wire` bytes leaves once the bucket holds its size. `busyUntil` is when
    /// the bucket will have refilled what has left so far; a full bucket (`busyUntil` ≤ now)
    /// lets `bucketBytes` through at once. Dropped (in `enqueue`) when it would wait longer
    /// than `buffer`.
    private func bucketDeparture(_ wire: Int, now: Instant) -> Instant {
        max(now, busyUntil - serialization(max(bucketBytes - wire, 0)))
    }

    /// How long a packet offered now would wait for the bottleneck.
    private func waitingTime(_ bytes: Int, now: Instant) -> Duration {
        if bucketBytes > 0 { return bucketDeparture(bytes + perPacketOverhead, now: now) - now }
        return max(busyUntil - now, .zero)
    }

    private mutating func addCrossTraffic(until now: Instant) {
        guard crossTrafficBitsPerSecond > 0 else { return }
        guard let last = crossCheckedAt else { crossCheckedAt = now; return }
        // 1200-byte packets at the cross rate, spread evenly over the elapsed time.
        let gap = Duration.nanoseconds(1200 * 8_000_000_000 / crossTrafficBitsPerSecond)
        var t = last + gap
        while t <= now {
            _ = enqueue(1200, now: t)
            crossCheckedAt = t
            t = t + gap
        }
    }

    mutating func send(_ bytes: [UInt8], now: Instant) {
        addCrossTraffic(until: now)
        packetsIn += 1
        if let b = burstLoss {
            if bad { if chance(b.leave) { bad = false } } else if chance(b.enter) { bad = true }
        }
        if bad || chance(randomLoss) { droppedByLoss += 1; return }
        queueDelays.append((now, waitingTime(bytes.count, now: now)))
        guard let left = enqueue(bytes.count, now: now) else { droppedByBuffer += 1; return }
        var at = left + delay
        if jitter > .zero { at = at + .nanoseconds(Int64(random.next() % UInt64(jitter.totalNanoseconds))) }
        if jitterKeepsOrder, let last = inFlight.last, at < last.at { at = last.at }
        let i = inFlight.lastIndex { $0.at <= at }.map { $0 + 1 } ?? 0
        inFlight.insert((at, bytes), at: i)
    }

    var nextDelivery: Instant? { inFlight.first?.at }

    mutating func deliver(now: Instant) -> [[UInt8]] {
        var n = 0
        while n < inFlight.count, inFlight[n].at <= now { n += 1 }
        defer { inFlight.removeFirst(n) }
        return inFlight.prefix(n).map(\.bytes)
    }
}
