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

    /// A bulk TCP download through the same buffer (`BulkFlow`, from its `startsAt`); nil: none.
    var bulk: BulkFlow?

    /// A window-based bulk flow, Reno in small: slow start (one packet more per ack) until its
    /// first loss, then one packet more per window; at a loss its window × 0.7 (cubic's β), once a
    /// round trip. Ack-clocked: a packet's ack returns one way after it left the bottleneck and one
    /// way back; a dropped packet is noticed a buffer's time later, as duplicate acks would tell it.
    /// What its packets carry is counted when their acks return.
    struct BulkFlow {
        var startsAt: Instant
        /// The download stops sending new data then (nil: never).
        var endsAt: Instant?
        var packetBytes = 1500
        private(set) var window = 10.0
        private var slowStart = true
        private var inFlight = 0
        private var started = false
        private var acks: [Instant] = []
        private var losses: [Instant] = []
        private var recoveryUntil = Instant.zero
        /// When each of its delivered packets' ack returned.
        private(set) var delivered: [Instant] = []

        init(startsAt: Instant, endsAt: Instant? = nil) {
            self.startsAt = startsAt
            self.endsAt = endsAt
        }

        /// Bits per second delivered over [from, to).
        func bitsPerSecond(from: Instant, to: Instant) -> Int64 {
            let n = delivered.filter { $0 >= from && $0 < to }.count
            return Int64(Double(n * packetBytes * 8) / (to - from).seconds)
        }

        /// The time of the next event at or before `now` (the start, an ack, or a loss noticed),
        /// taken into the window.
        fileprivate mutating func next(until now: Instant) -> Instant? {
            if !started, startsAt <= now { started = true; return startsAt }
            let a = acks.first.flatMap { $0 <= now ? $0 : nil }
            if let l = losses.first, l <= now, a.map({ l < $0 }) ?? true {
                losses.removeFirst()
                lost(at: l)
                return l
            }
            guard let a else { return nil }
            acks.removeFirst()
            inFlight -= 1
            delivered.append(a)
            window += slowStart ? 1 : 1 / window
            return a
        }

        private mutating func lost(at t: Instant) {
            inFlight -= 1
            guard t >= recoveryUntil else { return }
            window = max(2, window * 0.7)
            slowStart = false
            recoveryUntil = t + .milliseconds(200)
        }

        fileprivate func wantsToSend(at t: Instant) -> Bool {
            started && Double(inFlight) < window.rounded(.down) && endsAt.map { t < $0 } ?? true
        }
        fileprivate mutating func sent(ackAt: Instant?, lossNoticedAt: Instant) {
            inFlight += 1
            if let a = ackAt { acks.append(a) } else { losses.append(lossNoticedAt) }
        }
    }

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

    /// The bulk flow's acks, losses and sends up to `now`, in time order.
    private mutating func runBulk(until now: Instant) {
        while bulk != nil, let at = bulk!.next(until: now) {
            while bulk!.wantsToSend(at: at) {
                let departs = enqueue(bulk!.packetBytes, now: at)
                bulk!.sent(ackAt: departs.map { $0 + delay + delay }, lossNoticedAt: at + buffer + delay + delay)
            }
        }
    }

    mutating func send(_ bytes: [UInt8], now: Instant) {
        addCrossTraffic(until: now)
        runBulk(until: now)
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
