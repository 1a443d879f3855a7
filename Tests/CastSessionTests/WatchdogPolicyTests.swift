import CastCore
import Testing
@testable import CastSession

/// Issue 17: WATCHDOG=1 only while media makes progress or castd legitimately waits.
@Suite struct WatchdogPolicyTests {
    let policy = WatchdogPolicy()
    let t0 = Instant.zero + .seconds(100)

    func facts(running: Bool = true, started: Duration? = .zero, last: Duration? = nil, call: Duration? = nil)
        -> WatchdogPolicy.Facts {
        .init(mediaRunning: running, mediaStartedAt: started.map { t0 + $0 }, lastFrameAt: last.map { t0 + $0 },
              mediaCallSince: call.map { t0 + $0 })
    }

    @Test func waitingWithoutMediaFeeds() {
        #expect(policy.evaluate(facts(running: false, started: nil), now: t0 + .seconds(3600)) == .feed)
    }

    @Test func framesWithinFiveSecondsFeedAndAGapIsAStall() {
        #expect(policy.evaluate(facts(last: .seconds(10)), now: t0 + .seconds(15)) == .feed)
        #expect(policy.evaluate(facts(last: .seconds(10)), now: t0 + .seconds(16)) == .stalled("no frame encoded for 6 s"))
    }

    @Test func beforeTheFirstFrameTheGraceApplies() {
        // A frame from before the (re)start does not count as progress of this start.
        let f = facts(started: .seconds(10), last: .seconds(9))
        #expect(policy.evaluate(f, now: t0 + .seconds(99)) == .feed)
        #expect(policy.evaluate(f, now: t0 + .seconds(101)) == .stalled("no first frame 91 s after the media started"))
    }

    @Test func aMediaCallThatDoesNotReturnStarvesTheWatchdog() {
        let f = facts(running: false, started: nil, call: .seconds(50))
        #expect(policy.evaluate(f, now: t0 + .seconds(60)) == .feed)
        #expect(policy.evaluate(f, now: t0 + .seconds(61)) == .starve("a media start or stop has not returned for 11 s"))
    }

    @Test func anEndedSessionIsNotAStall() {
        let f = WatchdogPolicy.Facts(mediaRunning: true, mediaStartedAt: t0, lastFrameAt: t0, mediaCallSince: nil, ended: true)
        #expect(policy.evaluate(f, now: t0 + .seconds(60)) == .feed)
    }
}
