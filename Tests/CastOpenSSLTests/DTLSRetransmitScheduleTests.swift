import Testing
import CastCore
@testable import CastOpenSSL

@Suite struct DTLSRetransmitScheduleTests {
    @Test func doublesFromOneSecondCapsAtSixtyAndGivesUp() {
        var s = DTLSRetransmitSchedule(maxRetransmissions: 8)
        let t0 = Instant(nanoseconds: 42)
        #expect(s.deadline == nil)
        #expect(s.expire(now: t0 + .seconds(1000)) == .notYet)
        s.flightSent(now: t0)
        #expect(s.deadline == t0 + .seconds(1))
        #expect(s.expire(now: t0 + .milliseconds(999)) == .notYet)
        var t = t0
        var waits: [Int64] = []
        for n in 1...8 {
            let d = s.deadline!
            waits.append((d - t).totalNanoseconds / 1_000_000_000)
            t = d
            #expect(s.expire(now: t) == .retransmit(n))
        }
        #expect(waits == [1, 2, 4, 8, 16, 32, 60, 60])
        t = s.deadline!
        #expect(s.expire(now: t) == .giveUp)
        #expect(s.deadline == nil)
    }

    @Test func aNewFlightRestartsAtOneSecondAndStopClears() {
        var s = DTLSRetransmitSchedule()
        s.flightSent(now: .zero)
        #expect(s.expire(now: Instant(nanoseconds: 1_000_000_000)) == .retransmit(1))
        #expect(s.interval == .seconds(2))
        s.flightSent(now: Instant(nanoseconds: 1_500_000_000))
        #expect(s.deadline == Instant(nanoseconds: 2_500_000_000))
        #expect(s.retransmissions == 0)
        s.stop()
        #expect(s.deadline == nil)
        #expect(s.expire(now: Instant(nanoseconds: 10_000_000_000)) == .notYet)
    }

    @Test func lateCallRetransmitsOnceAndSchedulesFromNow() {
        var s = DTLSRetransmitSchedule()
        s.flightSent(now: .zero)
        // The owner woke up late (5 s): one retransmission, next in 2 s from now.
        #expect(s.expire(now: Instant(nanoseconds: 5_000_000_000)) == .retransmit(1))
        #expect(s.deadline == Instant(nanoseconds: 7_000_000_000))
    }
}
