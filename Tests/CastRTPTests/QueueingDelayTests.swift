import Testing
import CastCore
@testable import CastRTP

@Suite struct QueueingDelayTests {
    func ms(_ v: Double) -> Instant { Instant(nanoseconds: Int64(v * 1e6)) }

    @Test func readsTheDelayAboveTheLeastOneSeenAndIgnoresTheClockOffset() {
        var q = QueueingDelay()
        #expect(q.current == nil)
        // Receiver clock 100 s ahead; 20 ms one way, then a queue building to 150 ms.
        q.arrived(sentAt: ms(0), arrivalMs: 100_000 + 20)
        #expect(q.current == 0)
        q.arrived(sentAt: ms(10), arrivalMs: 100_000 + 10 + 20 + 150)
        #expect(q.current == 150)
        // A packet sent earlier that arrives later does not replace the latest-sent reading.
        q.arrived(sentAt: ms(5), arrivalMs: 100_000 + 5 + 20 + 300)
        #expect(q.current == 150)
    }

    @Test func forgetsABaseOlderThanTheWindowSoThatALongerPathIsNotAQueue() {
        var q = QueueingDelay()
        q.arrived(sentAt: ms(0), arrivalMs: 20)
        // The path gets 60 ms longer: a queue at first, the new base after 10 s.
        q.arrived(sentAt: ms(5_000), arrivalMs: 5_000 + 80)
        #expect(q.current == 60)
        for s in 6...11 { q.arrived(sentAt: ms(Double(s) * 1_000), arrivalMs: Double(s) * 1_000 + 80) }
        #expect(q.current == 0)
    }

    @Test func aQueueHeldLongerThanTheWindowStillStandsAgainstTheLastMinute() {
        var q = QueueingDelay()
        q.arrived(sentAt: ms(0), arrivalMs: 20)
        #expect(q.takeLeastStanding() == 0)
        #expect(q.takeLeastStanding() == nil)   // nothing since
        // Another flow keeps 150 ms queued from 1 s on: after 10 s it is the short base, not the long one.
        for s in 1...30 { q.arrived(sentAt: ms(Double(s) * 1_000), arrivalMs: Double(s) * 1_000 + 170) }
        #expect(q.current == 0)
        #expect(q.takeLeastStanding() == 150)
        // The least of the packets since the last reading: one of them found the queue empty.
        q.arrived(sentAt: ms(30_100), arrivalMs: 30_100 + 170)
        q.arrived(sentAt: ms(30_200), arrivalMs: 30_200 + 30)
        q.arrived(sentAt: ms(30_300), arrivalMs: 30_300 + 170)
        #expect(q.takeLeastStanding() == 10)
        // A minute on, the long base has forgotten the empty queue too.
        for s in 31...95 { q.arrived(sentAt: ms(Double(s) * 1_000), arrivalMs: Double(s) * 1_000 + 170) }
        #expect(q.takeLeastStanding() == 0)
    }
}
