import Testing
import CastCore
@testable import CastRTP

@Suite struct PacerTests {
    /// Polls at every deadline until the queue is empty; returns (item, send time) pairs.
    func drain(_ p: inout Pacer<Int>, from start: Instant) -> [(Int, Instant)] {
        var out: [(Int, Instant)] = []
        var now = start
        for _ in 0..<10_000 {
            out += p.poll(now: now).map { ($0, now) }
            guard let next = p.nextDeadline else { break }
            #expect(next > now)
            now = next
        }
        return out
    }

    @Test func aBurstLeavesAtOnceAndTheRestAtThePacingRate() {
        // 8 Mbit/s = 1 byte/µs; 3000 bytes of burst.
        var p = Pacer<Int>(configuration: .init(bitsPerSecond: 8_000_000, burstBytes: 3000))
        for i in 0..<10 { p.enqueue(i, size: 1000) }
        let sent = drain(&p, from: ms(0))
        #expect(sent.map(\.0) == Array(0..<10))
        let times = sent.map { $0.1.nanoseconds }
        #expect(times == [0, 0, 0, 1] + (1...6).map { Int64($0) * 1_000_000 + 1 })
        #expect(p.nextDeadline == nil)
    }

    @Test func aQueuedItemAfterTheFirstIsFoundAndUrgentOnesAreNotLookedAt() {
        var p = Pacer<Int>(configuration: .init(bitsPerSecond: 8_000_000, burstBytes: 3000))
        #expect(p.queued(afterFirst: { _ in true }) == nil)
        p.enqueue(10, size: 100)
        #expect(p.queued(afterFirst: { _ in true }) == nil, "the first is never the answer")
        p.enqueue(99, size: 100, urgent: true)
        for i in 11...14 { p.enqueue(i, size: 100) }
        #expect(p.queued(afterFirst: { $0 % 2 == 0 }) == 12)
        #expect(p.queued(afterFirst: { $0 == 10 || $0 == 99 }) == nil)
        #expect(p.queued(afterFirst: { $0 > 20 }) == nil)
    }

    @Test func aSmallFrameAfterAPauseIsNotDelayed() {
        var p = Pacer<Int>(configuration: .init(bitsPerSecond: 8_000_000, burstBytes: 3000))
        for i in 0..<10 { p.enqueue(i, size: 1000) }
        _ = drain(&p, from: ms(0))
        for i in 10..<13 { p.enqueue(i, size: 1000) }
        do { let v = p.poll(now: ms(40)); #expect(v == [10, 11, 12]) }
    }

    @Test func aKeyframeOf120PacketsIsSpreadOverAFewMilliseconds() {
        var p = Pacer<Int>()   // 80 Mbit/s, 16 × 1200 bytes of burst
        for i in 0..<120 { p.enqueue(i, size: 1200) }
        let sent = drain(&p, from: ms(1000))
        #expect(sent.count == 120)
        #expect(sent.filter { $0.1 == ms(1000) }.count == 16)   // the burst allowance
        let span = sent.last!.1 - ms(1000)
        // 104 × 1200 bytes beyond the burst at 10 MB/s ≈ 12.5 ms.
        #expect(span > .milliseconds(12) && span < .milliseconds(13))
    }

    @Test func urgentItemsGoFirstInArrivalOrder() {
        var p = Pacer<Int>(configuration: .init(bitsPerSecond: 8_000_000, burstBytes: 1))
        p.enqueue(1, size: 1000)
        p.enqueue(2, size: 1000)
        do { let v = p.poll(now: ms(0)); #expect(v == [1]) }
        p.enqueue(100, size: 10, urgent: true)
        p.enqueue(101, size: 10, urgent: true)
        #expect(drain(&p, from: ms(0)).map(\.0) == [100, 101, 2])
    }

    @Test func anIdlePacerHasNoDeadline() {
        var p = Pacer<Int>()
        #expect(p.nextDeadline == nil)
        do { let v = p.poll(now: ms(5)); #expect(v.isEmpty) }
        #expect(p.nextDeadline == nil)
    }
}
