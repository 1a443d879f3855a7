import CastCore
import Testing
@testable import CastWebRTC

/// The one STUN transaction ICE and TURN share, driven on a fake clock.
@Suite struct StunTransactionTests {
    static func tid(_ n: UInt8) -> StunTransactionID { StunTransactionID(bytes: [UInt8](repeating: n, count: 12))! }
    static let t0 = Instant.zero
    static func at(_ ms: Int) -> Instant { t0 + .milliseconds(ms) }

    /// Runs one transaction alone until it gives up; the instants it retransmitted at and the
    /// instant it timed out.
    static func run(_ schedule: StunRetransmission) -> (sends: [Instant], timedOut: Instant?, transmissions: Int) {
        var table = StunTransactions<String>()
        table.start(tid(1), request: [1, 2, 3], context: "req", schedule: schedule, now: t0)
        var sends = [t0]
        while let d = table.nextDeadline {
            switch table.nextDue(now: d) {
            case .retransmit(let request, let context)?:
                #expect(request == [1, 2, 3])
                #expect(context == "req")
                sends.append(d)
            case .timedOut(let context, let n)?:
                #expect(context == "req")
                #expect(table.isEmpty)
                return (sends, d, n)
            case nil:
                Issue.record("nothing due at the deadline \(d)")
                return (sends, nil, 0)
            }
        }
        return (sends, nil, 0)
    }

    @Test func retransmitsWithDoublingRTOThenWaitsRmRTO() {
        // RFC 8489 §6.2.1's own example: RTO 500 ms, Rc 7, Rm 16 — sent at 0, 500, 1500, 3500,
        // 7500, 15500, 31500 ms, given up at 39500 ms.
        let r = Self.run(StunRetransmission(initialRTO: .milliseconds(500), maxTransmissions: 7,
                                            lastWait: .milliseconds(500 * 16)))
        #expect(r.sends == [0, 500, 1500, 3500, 7500, 15500, 31500].map(Self.at))
        #expect(r.timedOut == Self.at(39500))
        #expect(r.transmissions == 7)
    }

    @Test func capsTheRTOAndWaitsOneMoreRTOWithoutLastWait() {
        // ICE's schedule: 250 ms doubling, capped at 1 s; after the last send, one more RTO.
        let r = Self.run(StunRetransmission(initialRTO: .milliseconds(250), maxRTO: .seconds(1), maxTransmissions: 5))
        #expect(r.sends == [0, 250, 750, 1750, 2750].map(Self.at))
        #expect(r.timedOut == Self.at(3750))
        #expect(r.transmissions == 5)
    }

    @Test func reliableTransportSendsOnceAndWaitsTi() {
        let r = Self.run(.reliable(timeout: .milliseconds(39_500)))
        #expect(r.sends == [Self.t0])
        #expect(r.timedOut == Self.at(39_500))
        #expect(r.transmissions == 1)
    }

    @Test func oneSendWithoutLastWaitGivesUpAfterOneRTO() {
        let r = Self.run(StunRetransmission(initialRTO: .milliseconds(500), maxTransmissions: 1))
        #expect(r.sends == [Self.t0])
        #expect(r.timedOut == Self.at(500))
    }

    @Test func earlyOrRepeatedTimeoutsChangeNothing() {
        var t = StunTransaction(id: Self.tid(1), request: [9], schedule:
            StunRetransmission(initialRTO: .milliseconds(100), maxTransmissions: 3), now: Self.t0)
        #expect(t.handleTimeout(now: Self.at(99)) == nil)
        #expect(t.deadline == Self.at(100))
        #expect(t.handleTimeout(now: Self.at(100)) == .retransmit)
        #expect(t.handleTimeout(now: Self.at(100)) == nil)   // the same instant again
        #expect(t.transmissions == 2)
        #expect(t.deadline == Self.at(300))
    }

    @Test func aResponseMatchesByTransactionIDOnceAndALateDuplicateMatchesNothing() {
        var table = StunTransactions<String>()
        let schedule = StunRetransmission(initialRTO: .milliseconds(100), maxTransmissions: 3)
        table.start(Self.tid(1), request: [1], context: "one", schedule: schedule, now: Self.t0)
        table.start(Self.tid(2), request: [2], context: "two", schedule: schedule, now: Self.at(50))
        #expect(table.context(for: Self.tid(3)) == nil)        // never sent
        #expect(table.context(for: Self.tid(2)) == "two")      // a peek keeps it pending
        #expect(table.count == 2)
        #expect(table.finish(Self.tid(2)) == "two")
        #expect(table.finish(Self.tid(2)) == nil)              // a duplicate response
        #expect(table.context(for: Self.tid(2)) == nil)
        #expect(table.nextDeadline == Self.at(100))            // only "one" is left
        // Its retransmission is no longer "two"'s.
        guard case .retransmit(let request, let context)? = table.nextDue(now: Self.at(150)) else {
            Issue.record("no retransmission at 150 ms"); return
        }
        #expect(request == [1] && context == "one")
        #expect(table.nextDue(now: Self.at(150)) == nil)
    }

    @Test func dueTransactionsComeEarliestFirstAndTimedOutOnesAreRemoved() {
        var table = StunTransactions<Int>()
        table.start(Self.tid(1), request: [1], context: 1,
                    schedule: StunRetransmission(initialRTO: .milliseconds(300), maxTransmissions: 2), now: Self.t0)
        table.start(Self.tid(2), request: [2], context: 2, schedule: .reliable(timeout: .milliseconds(100)), now: Self.t0)
        var order: [String] = []
        while let due = table.nextDue(now: Self.at(400)) {
            switch due {
            case .retransmit(_, let c): order.append("retransmit \(c)")
            case .timedOut(let c, let n): order.append("timedOut \(c) after \(n)")
            }
        }
        #expect(order == ["timedOut 2 after 1", "retransmit 1"])
        #expect(table.count == 1)
        #expect(table.contains { $0 == 1 })
        table.removeAll { $0 == 1 }
        #expect(table.isEmpty && table.nextDeadline == nil)
    }
}
