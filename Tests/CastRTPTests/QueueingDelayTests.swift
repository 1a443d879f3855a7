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
}
