import Testing
import CastCore
import CastMedia

@Suite struct FramePacerTests {
    let t0 = Instant(nanoseconds: 5_000_000_000)

    @Test func ticksAtThirtyPerSecondWithoutDrift() {
        var p = FramePacer(frameRate: 30, start: t0)
        #expect(p.nextTick == t0)
        #expect(p.decide(now: t0, changed: true) == .encode)
        #expect(p.nextTick == t0 + .nanoseconds(33_333_333))
        #expect(p.decide(now: t0 + .milliseconds(10), changed: true) == .wait(until: t0 + .nanoseconds(33_333_333)))
        // Drive 30 ticks exactly on time: the 30th lands on t0 + 1 s exactly.
        var now = p.nextTick
        for _ in 1..<30 { _ = p.decide(now: now, changed: true); now = p.nextTick }
        #expect(now == t0 + .seconds(1))
        #expect(p.missedTicks == 0)
    }

    @Test func lateOwnerSkipsMissedTicksInsteadOfBunching() {
        var p = FramePacer(frameRate: 30, start: t0)
        _ = p.decide(now: t0, changed: true)
        // 100 ms late: ticks at 33.3 and 66.7 and 100 ms are gone; the next is at 133.3 ms.
        #expect(p.decide(now: t0 + .milliseconds(100), changed: true) == .encode)
        #expect(p.missedTicks == 2)
        #expect(p.nextTick == t0 + .nanoseconds(133_333_333))
    }

    @Test func stillScreenSkipsButRefreshesOncePerSecond() {
        var p = FramePacer(frameRate: 30, start: t0)
        #expect(p.decide(now: t0, changed: false) == .refresh)  // nothing encoded yet
        var decisions: [FramePacer.Decision] = []
        var now = p.nextTick
        for _ in 0..<60 {  // two more seconds of an unchanged screen
            decisions.append(p.decide(now: now, changed: false))
            now = p.nextTick
        }
        #expect(decisions.filter { $0 == .refresh }.count == 2)
        #expect(decisions.filter { $0 == .skip }.count == 58)
        #expect(decisions[29] == .refresh)  // tick 30 = t0 + 1 s exactly
    }

    @Test func frameRateChangeReanchors() {
        var p = FramePacer(frameRate: 30, start: t0)
        _ = p.decide(now: t0, changed: true)
        p.setFrameRate(15, now: t0 + .milliseconds(20))
        #expect(p.nextTick == t0 + .milliseconds(20))
        _ = p.decide(now: t0 + .milliseconds(20), changed: true)
        #expect(p.nextTick == t0 + .milliseconds(20) + .nanoseconds(66_666_666))
    }
}
