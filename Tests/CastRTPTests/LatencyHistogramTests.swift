import Testing
import CastCore
@testable import CastRTP

@Suite struct LatencyHistogramTests {
    @Test func quantilesReadTheBucketsUpperEdge() {
        var h = LatencyHistogram()
        #expect(h.quantile(0.5) == nil && h.milliseconds == "-")
        for us in [100, 1_100, 1_200, 9_900, 20_000] { h.record(.microseconds(us)) }
        #expect(h.count == 5)
        #expect(h.quantile(0.5) == .microseconds(1_250))   // 1.2 ms lies in [1.0, 1.25)
        #expect(h.quantile(0.95) == .microseconds(20_250))
        #expect(h.quantile(0) == .microseconds(250))
        #expect(h.milliseconds == "1.25/20.25")
    }

    @Test func aWindowIsTheDifferenceOfTwoReadings() {
        var h = LatencyHistogram()
        for _ in 0..<10 { h.record(.milliseconds(40)) }
        let earlier = h
        for _ in 0..<3 { h.record(.milliseconds(2)) }
        let window = h.since(earlier)
        #expect(window.count == 3)
        #expect(window.quantile(0.95) == .microseconds(2_250))
        #expect(h.quantile(0.5) == .microseconds(40_250))
    }

    @Test func outOfRangeValuesNeitherTrapNorVanish() {
        var h = LatencyHistogram()
        h.record(.seconds(-3))          // two threads' clocks: counted as zero
        h.record(.seconds(3_600))       // past the last bucket: counted there
        #expect(h.count == 2)
        #expect(h.quantile(0) == .microseconds(250))
        #expect(h.quantile(1) == .milliseconds(128))
    }
}
