import Testing
import CastMedia

@Suite struct StageTimesTests {
    @Test func summarisesTheWindowThenStartsAfresh() {
        var t = StageTimes()
        #expect(t.drain() == nil)
        for ms in 1...100 { t.record(.milliseconds(ms)) }
        let s = t.drain()
        #expect(s?.count == 100)
        #expect(s?.p50 == .milliseconds(51))
        #expect(s?.p95 == .milliseconds(95))
        #expect(s?.max == .milliseconds(100))
        #expect(t.drain() == nil)
        t.record(.microseconds(2500))
        #expect(t.drain()?.milliseconds == "2.50/2.50/2.50")
    }

    @Test func keepsOnlyTheNewestSamplesButCountsAndMaxesThemAll() {
        var t = StageTimes(capacity: 4)
        t.record(.milliseconds(900))
        for _ in 0..<10 { t.record(.milliseconds(3)) }
        let s = t.drain()
        #expect(s?.count == 11)
        #expect(s?.max == .milliseconds(900))
        #expect(s?.p95 == .milliseconds(3))   // the 900 ms sample left the window
    }

    @Test func formatsMillisecondsWithTwoDecimals() {
        var t = StageTimes()
        for _ in 0..<10 { t.record(.microseconds(412)) }
        t.record(.microseconds(12_049))
        t.record(.seconds(1))
        #expect(t.drain()?.milliseconds == "0.41/12.05/1000.00")
    }
}
