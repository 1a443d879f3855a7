import CastCore
import Foundation
import Testing
import SansIOContract
@testable import CastSignaling

func row(_ n: Int, to recipient: String = "sender", session: String = "s1", type: String = "ice_candidate",
         rest: Bool = false) -> SignalingRow {
    // PostgREST and Realtime print the same instant differently.
    let ts = rest ? String(format: "2026-10-20T12:40:%02d.%06d+00:00", n / 1000, (n % 1000) * 1000)
                  : String(format: "2026-10-20 12:40:%02d.%03dZ", n / 1000, n % 1000)
    return SignalingRow(id: "row-\(n)", sessionID: session, senderRole: "receiver", recipientRole: recipient,
                        messageType: type, payload: .object([:]), createdAt: ts)
}

func ids(_ out: [SignalingMerger.Output]) -> [String] {
    out.compactMap { if case .row(let r) = $0 { return r.id }; return nil }
}

/// The tests' words for one input at a fixed instant, each answering the outputs it drained
/// (the `SansIO` contract); the retry's timing is tested with its own clock below.
extension SignalingMerger {
    mutating func step(_ input: Input, now: Instant = .zero) -> [Output] {
        handle(input, now: now)
        var out: [Output] = []
        while let o = poll() { out.append(o) }
        return out
    }
    mutating func subscribed() -> [Output] { step(.subscribed) }
    mutating func channelClosed() { #expect(step(.channelClosed) == []) }
    mutating func realtimeRow(_ r: SignalingRow) -> [Output] { step(.realtimeRow(r)) }
    mutating func realtimeStatus(_ s: SessionStatus) -> [Output] { step(.realtimeStatus(s)) }
    mutating func backfillCompleted(epoch: Int, rows: [SignalingRow], status: SessionStatus?) -> [Output] {
        step(.backfillCompleted(epoch: epoch, rows: rows, status: status))
    }
    /// A failed backfill, then the timeout at its retry deadline: what the retry asks.
    mutating func backfillFailed(epoch: Int) -> [Output] {
        var out = step(.backfillFailed(epoch: epoch))
        if let due = nextDeadline() { handleTimeout(now: due); while let o = poll() { out.append(o) } }
        return out
    }
}

@Suite struct SignalingMergerTests {
    @Test func timestampsFromBothSourcesCompare() {
        #expect(Timestamp.microseconds("1970-01-01T00:00:00Z") == 0)
        #expect(Timestamp.microseconds("2026-10-20T12:40:00.123Z") == 1_792_500_000_123_000)
        #expect(Timestamp.microseconds("2026-10-20 12:40:00.123+00") == 1_792_500_000_123_000)
        #expect(Timestamp.microseconds("2026-10-20T14:40:00.123456+02:00") == 1_792_500_000_123_456)
        #expect(Timestamp.microseconds("2026-10-20T12:40:00.1234567891Z") == 1_792_500_000_123_456)
        #expect(Timestamp.microseconds("2026-10-20T12:40:00") == 1_792_500_000_000_000)
        for bad in ["", "2026-10-20", "2026-13-01T00:00:00Z", "2026-10-20T12:40:00.Z", "2026-10-20T12:40:00Q", "x026-10-20T12:40:00Z"] {
            #expect(Timestamp.microseconds(bad) == nil)
        }
    }

    @Test func subscribeAsksForBackfillAndHoldsRealtimeRowsUntilItAnswers() {
        var m = SignalingMerger(sessionID: "s1")
        #expect(m.subscribed() == [.backfill(epoch: 1)])
        // Row 3 arrives live while the backfill (rows 1, 2, 3) is in flight.
        #expect(m.realtimeRow(row(3)) == [])
        let out = m.backfillCompleted(epoch: 1, rows: [row(1, rest: true), row(2, rest: true), row(3, rest: true)], status: .pairing)
        #expect(out.first == .status(.pairing))
        #expect(ids(out) == ["row-1", "row-2", "row-3"])
        #expect(m.realtimeRow(row(4)) == [.row(row(4))])
        #expect(m.realtimeRow(row(4)) == [])
        #expect(m.realtimeRow(row(2)) == [])
    }

    @Test func heldRowsNewerThanTheBackfillComeAfterIt() {
        var m = SignalingMerger(sessionID: "s1")
        _ = m.subscribed()
        _ = m.realtimeRow(row(5))
        _ = m.realtimeRow(row(4))   // pushes may arrive out of commit order
        let out = m.backfillCompleted(epoch: 1, rows: [row(1, rest: true), row(2, rest: true)], status: nil)
        #expect(ids(out) == ["row-1", "row-2", "row-4", "row-5"])
        #expect(!out.contains { if case .status = $0 { return true }; return false })
    }

    @Test func keepsOnlyRowsForTheSenderOfThisSession() {
        var m = SignalingMerger(sessionID: "S1".lowercased())
        _ = m.subscribed()
        let out = m.backfillCompleted(epoch: 1, rows: [row(1), row(2, to: "receiver"), row(3, session: "s2"), row(4, to: "")], status: nil)
        #expect(ids(out) == ["row-1"])
        #expect(m.realtimeRow(row(5, to: "receiver")) == [])
        #expect(m.realtimeRow(row(6, session: "other")) == [])
    }

    @Test func socketDropThenResubscribeLosesNothingAndRepeatsNothing() {
        var m = SignalingMerger(sessionID: "s1")
        _ = m.subscribed()
        var got = ids(m.backfillCompleted(epoch: 1, rows: [row(1, rest: true)], status: .pairing))
        got += ids(m.realtimeRow(row(2)))
        m.channelClosed()
        // Rows 3 and 4 are inserted while the socket is down; row 4's push straggles in late.
        got += ids(m.realtimeRow(row(4)))
        #expect(m.subscribed() == [.backfill(epoch: 2)])
        got += ids(m.realtimeRow(row(5)))
        let out = m.backfillCompleted(epoch: 2, rows: (1...5).map { row($0, rest: true) }, status: .connecting)
        got += ids(out)
        #expect(out.first == .status(.connecting))
        got += ids(m.realtimeRow(row(6)))
        #expect(got == (1...6).map { "row-\($0)" })
    }

    @Test func staleBackfillIsIgnoredAndFailedBackfillIsAskedAgain() {
        var m = SignalingMerger(sessionID: "s1")
        _ = m.subscribed()
        m.channelClosed()
        _ = m.subscribed()
        #expect(m.backfillCompleted(epoch: 1, rows: [row(1)], status: .pairing) == [])
        #expect(m.backfillFailed(epoch: 1) == [])
        #expect(m.backfillFailed(epoch: 2) == [.backfill(epoch: 2)])
        #expect(ids(m.backfillCompleted(epoch: 2, rows: [row(1)], status: nil)) == ["row-1"])
    }

    @Test func statusChangesAreReportedOnce() {
        var m = SignalingMerger(sessionID: "s1")
        #expect(m.realtimeStatus(.connecting) == [.status(.connecting)])
        #expect(m.realtimeStatus(.connecting) == [])
        _ = m.subscribed()
        #expect(m.backfillCompleted(epoch: 1, rows: [], status: .connecting) == [])
        #expect(m.realtimeStatus(.disconnected) == [.status(.disconnected)])
    }

    /// Every interleaving of live pushes (some lost while down), drops and
    /// backfills delivers each row exactly once, in order within each batch.
    @Test func exhaustiveInterleavingsDeliverEachRowOnce() {
        // Rows 1…6 are committed one per step; the socket drops at step `drop`
        // and resubscribes at step `back`; pushes while down are lost.
        for drop in 1...6 {
            for back in drop...6 {
                for lateBackfill in [false, true] {
                    var m = SignalingMerger(sessionID: "s1")
                    var got: [String] = []
                    var committed: [Int] = []
                    var pendingEpoch: Int? = nil
                    if case .backfill(let e)? = m.subscribed().first { pendingEpoch = e }
                    if !lateBackfill, let e = pendingEpoch {
                        got += ids(m.backfillCompleted(epoch: e, rows: [], status: nil)); pendingEpoch = nil
                    }
                    var up = true
                    for n in 1...6 {
                        committed.append(n)
                        if n == drop { m.channelClosed(); up = false }
                        if n == back, !up {
                            up = true
                            if case .backfill(let e)? = m.subscribed().first { pendingEpoch = e }
                        }
                        if up { got += ids(m.realtimeRow(row(n))) }
                        if lateBackfill, n == back, let e = pendingEpoch {
                            got += ids(m.backfillCompleted(epoch: e, rows: committed.map { row($0, rest: true) }, status: nil))
                            pendingEpoch = nil
                        }
                    }
                    if let e = pendingEpoch {
                        got += ids(m.backfillCompleted(epoch: e, rows: committed.map { row($0, rest: true) }, status: nil))
                    }
                    if !up, case .backfill(let e)? = m.subscribed().first {
                        got += ids(m.backfillCompleted(epoch: e, rows: committed.map { row($0, rest: true) }, status: nil))
                    }
                    #expect(got == (1...6).map { "row-\($0)" }, "drop \(drop) back \(back) late \(lateBackfill)")
                }
            }
        }
    }
}

/// The merger keeps the one sans-IO contract, and its one deadline is the failed backfill's retry.
@Suite struct SignalingMergerContractTests {
    let t0 = Instant(nanoseconds: 7_000_000_000)

    @Test func theSharedContractHolds() {
        // Subscribed, a row held, the backfill failed: the retry is the deadline.
        let v = SansIOContract.violations({ SignalingMerger(sessionID: "s1") },
                                          inputs: [(.subscribed, t0), (.realtimeRow(row(3)), t0 + .milliseconds(5)),
                                                   (.realtimeStatus(.pairing), t0 + .milliseconds(6)),
                                                   (.backfillFailed(epoch: 1), t0 + .milliseconds(10))],
                                          expected: [.backfill(epoch: 1), .status(.pairing)])
        #expect(v.isEmpty, "\(v)")
        // Live, with nothing waiting: no deadline, and a timeout gives nothing.
        let live = SansIOContract.violations({ SignalingMerger(sessionID: "s1") },
                                             inputs: [(.subscribed, t0), (.backfillCompleted(epoch: 1, rows: [row(1)], status: nil), t0),
                                                      (.realtimeRow(row(2)), t0)],
                                             expected: [.backfill(epoch: 1), .row(row(1)), .row(row(2))], expectsDeadline: false)
        #expect(live.isEmpty, "\(live)")
    }

    @Test func aFailedBackfillIsAskedAgainAtTheDeadlineNotBefore() {
        var m = SignalingMerger(sessionID: "s1", retryDelay: .seconds(2))
        #expect(m.step(.subscribed, now: t0) == [.backfill(epoch: 1)])
        #expect(m.nextDeadline() == nil)
        #expect(m.step(.backfillFailed(epoch: 1), now: t0 + .milliseconds(300)) == [])
        let due = t0 + .milliseconds(2300)
        #expect(m.nextDeadline() == due)
        // A row arrives while the retry waits: held, not delivered.
        #expect(m.step(.realtimeRow(row(2)), now: t0 + .seconds(1)) == [])
        m.handleTimeout(now: due - .milliseconds(1))   // the timer woke early: nothing yet
        #expect(m.poll() == nil)
        #expect(m.nextDeadline() == due)
        m.handleTimeout(now: due)                      // due: the same epoch asked again, once
        #expect(m.poll() == .backfill(epoch: 1))
        #expect(m.poll() == nil)
        #expect(m.nextDeadline() == nil)
        m.handleTimeout(now: due)
        #expect(m.poll() == nil)
        // The retry's answer holds the row that arrived meanwhile too: each row once, in order.
        let out = m.step(.backfillCompleted(epoch: 1, rows: [row(1, rest: true), row(2, rest: true)], status: nil), now: due + .milliseconds(80))
        #expect(ids(out) == ["row-1", "row-2"])
        #expect(m.step(.realtimeRow(row(2)), now: due + .milliseconds(90)) == [])
    }

    @Test func aNewSubscriptionOrADropCancelsTheRetry() {
        var m = SignalingMerger(sessionID: "s1")
        _ = m.step(.subscribed, now: t0)
        _ = m.step(.backfillFailed(epoch: 1), now: t0)
        #expect(m.nextDeadline() == t0 + .seconds(2))
        #expect(m.step(.channelClosed, now: t0 + .seconds(1)) == [])
        #expect(m.nextDeadline() == nil)
        m.handleTimeout(now: t0 + .seconds(2))
        #expect(m.poll() == nil)   // no backfill for a channel that is down
        #expect(m.step(.subscribed, now: t0 + .seconds(3)) == [.backfill(epoch: 2)])
        _ = m.step(.backfillFailed(epoch: 1), now: t0 + .seconds(3))   // a stale epoch's failure: nothing to retry
        #expect(m.nextDeadline() == nil)
    }
}
