import Testing
import CastCore
@testable import CastRTP

/// Issue 19: the sender records, per frame, how long after its capture it was queued,
/// its first packet left and its last packet left.
@Suite struct VideoSenderLatencyTests {
    let base = VideoSenderTests()

    @Test func aFrameInOneBurstRecordsOneInstantForAllThree() throws {
        var s = try base.sender()
        s.handle(.accessUnit(base.keyframe(size: 3000), captureTime: ms(100)), now: ms(120))
        _ = s.datagrams(at: ms(120))
        let st = s.statistics
        #expect(st.captureToQueued.count == 1 && st.captureToFirstSent.count == 1 && st.captureToLastSent.count == 1)
        #expect(st.captureToQueued.quantile(0.5) == .microseconds(20_250))
        #expect(st.captureToFirstSent.quantile(0.5) == .microseconds(20_250))
        #expect(st.captureToLastSent.quantile(0.5) == .microseconds(20_250))
    }

    @Test func aPacedFrameRecordsItsLastPacketWhenItLeaves() throws {
        var s = try base.sender()
        // More than one burst (30 ms at the start's 2.5 Mbit/s: 9.4 kB): the pacer spreads
        // the rest over ~65 ms, and the last packet leaves then.
        s.handle(.accessUnit(base.keyframe(size: 30_000), captureTime: ms(0)), now: ms(0))
        var now = ms(0)
        _ = s.datagrams(at: now)
        #expect(s.statistics.captureToFirstSent.count == 1 && s.statistics.captureToLastSent.count == 0)
        while s.statistics.captureToLastSent.count == 0, now < ms(5_000) {
            now = s.nextDeadline() ?? now + .milliseconds(1)
            _ = s.datagrams(at: now)
        }
        let last = try #require(s.statistics.captureToLastSent.quantile(0.5))
        #expect(s.statistics.captureToFirstSent.quantile(0.5) == .microseconds(250))
        #expect(last > .milliseconds(40) && last < .milliseconds(80), "\(last)")
        #expect(last == (now - ms(0)) + .microseconds(250) - .nanoseconds((now - ms(0)).totalNanoseconds % 250_000))
    }
}
