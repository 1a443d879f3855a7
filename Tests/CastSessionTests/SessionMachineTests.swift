import Testing
import CastCore
import CastSignaling
@testable import CastSession

/// Drives a SessionMachine on a fake clock and records what it asks for.
struct Harness {
    var machine: SessionMachine
    var now = Instant.zero
    var log: [SessionMachine.Action] = []

    init(configuration: SessionMachine.Configuration = .init()) {
        final class Counter: @unchecked Sendable { var n = 0 }
        let counter = Counter()
        machine = SessionMachine(configuration: configuration) {
            counter.n += 1
            return "nid-\(counter.n)"
        }
    }

    @discardableResult
    mutating func send(_ input: SessionMachine.Input) -> [SessionMachine.Action] {
        machine.handle(input, now: now)
        return drain()
    }

    mutating func drain() -> [SessionMachine.Action] {
        var out: [SessionMachine.Action] = []
        while let a = machine.poll() { out.append(a) }
        log += out
        return out
    }

    /// Advances the clock, firing every deadline on the way, like the shell does.
    @discardableResult
    mutating func advance(_ d: Duration) -> [SessionMachine.Action] {
        let target = now + d
        var out: [SessionMachine.Action] = []
        while let deadline = machine.nextDeadline(), deadline <= target {
            now = max(now, deadline)
            machine.handleTimeout(now: now)
            out += drain()
        }
        now = target
        return out
    }

    /// Answers every insert as inserted, so the outbox keeps flowing.
    mutating func ackInserts(_ actions: [SessionMachine.Action]) -> [SessionMachine.Action] {
        var all: [SessionMachine.Action] = []
        var pending = actions
        while let i = pending.firstIndex(where: { if case .insert = $0 { return true }; return false }) {
            let rest = send(.insertFinished(.inserted))
            all += rest
            pending.remove(at: i)
            pending += rest
        }
        return all
    }

    static let prefs = StreamPrefs(autoQuality: true, resolution: "1080p", frameRate: 60)

    /// Ready on an approved session: returns the actions up to `createPeer`.
    mutating func startApproved(authExpiresIn: Duration = .seconds(7200)) -> [SessionMachine.Action] {
        send(.approved(authExpiresAt: now + authExpiresIn, prefs: Self.prefs))
        return send(.ready(status: .connecting))
    }

    /// Offer, answer and connected for the current negotiation.
    mutating func connect() {
        let nid = machine.negotiationId!
        let a = send(.offerReady(negotiationId: nid, sdp: "v=0 offer"))
        _ = ackInserts(a)
        send(.signal(.answer(sdp: "v=0 answer", negotiationID: nid)))
        send(.peerState(negotiationId: nid, .connected))
    }
}

extension Array where Element == SessionMachine.Action {
    var creates: [String] { compactMap { if case .createPeer(let n) = $0 { return n }; return nil } }
    var inserts: [OutgoingSignal] { compactMap { if case .insert(let r) = $0 { return r }; return nil } }
    var updates: [SessionUpdateAction] { compactMap { if case .sessionUpdate(let u) = $0 { return u }; return nil } }
    /// The log events among the actions (typed: level, event name, fields).
    var events: [LogLine] { compactMap { if case .log(let l) = $0 { return l }; return nil } }
    var finish: (Int32, String)? {
        for a in self { if case .finish(let c, let m) = a { return (c, m) } }
        return nil
    }
}

@Suite struct SessionStartTests {
    @Test func waitsForApprovalThenStartsMediaAndNegotiates() {
        var h = Harness()
        #expect(h.send(.ready(status: .pairing)).isEmpty)
        let a = h.send(.approved(authExpiresAt: h.now + .seconds(7200), prefs: Harness.prefs))
        #expect(a.first == .startMedia(Harness.prefs))
        #expect(a.creates == ["nid-1"])
    }

    @Test func backfilledApprovalOnAConnectingSessionNegotiatesAtReady() {
        var h = Harness()
        let a = h.startApproved()
        #expect(a.creates == ["nid-1"])
        #expect(a.contains(.startMedia(Harness.prefs)))
    }

    @Test func anEndedSessionAtStartExitsWithASentence() {
        var h = Harness()
        let a = h.send(.ready(status: .disconnected))
        #expect(a.finish?.0 == SessionMachine.sessionOverExitCode)
        #expect(a.finish?.1.contains("pair again") == true)
        #expect(a.inserts.isEmpty)
    }

    @Test func deniedEndsWithoutSendingAnything() {
        var h = Harness()
        h.send(.ready(status: .pairing))
        let a = h.send(.signal(.disconnect(DisconnectReason(raw: "denied"))))
        #expect(a.finish?.0 == SessionMachine.sessionOverExitCode)
        #expect(a.finish?.1 == "The receiver denied the request to cast.")
        #expect(a.inserts.isEmpty && a.updates.isEmpty)
    }
}

@Suite struct NegotiationTests {
    @Test func offerGoesFirstThenCandidatesThenEndOfCandidates() {
        var h = Harness()
        _ = h.startApproved()
        // Candidates gathered before the offer was produced wait for it.
        h.send(.localCandidate(IceCandidatePayload(negotiationID: "nid-1", candidate: "candidate:1 1 udp 1 127.0.0.1 5000 typ host")))
        var a = h.send(.offerReady(negotiationId: "nid-1", sdp: "OFFER"))
        #expect(a.inserts == [.offer(sdp: "OFFER", negotiationID: "nid-1")])
        a = h.send(.gatheringComplete(negotiationId: "nid-1"))
        #expect(a.inserts.isEmpty)   // one insert in flight at a time
        a = h.send(.insertFinished(.inserted))
        #expect(a.inserts == [.iceCandidate(IceCandidatePayload(negotiationID: "nid-1", candidate: "candidate:1 1 udp 1 127.0.0.1 5000 typ host"))])
        a = h.send(.insertFinished(.inserted))
        #expect(a.inserts == [.endOfCandidates(negotiationID: "nid-1")])
    }

    @Test func earlyCandidatesAreBufferedAndAppliedRightAfterTheAnswer() {
        var h = Harness()
        _ = h.startApproved()
        let c = IceCandidatePayload(negotiationID: "nid-1", candidate: "candidate:2 1 udp 2 abc.local 6000 typ host")
        #expect(h.send(.signal(.iceCandidate(c))).isEmpty)
        #expect(h.send(.signal(.endOfCandidates(negotiationID: "nid-1"))).isEmpty)
        let a = h.send(.signal(.answer(sdp: "ANSWER", negotiationID: "nid-1")))
        #expect(a == [.applyAnswer(negotiationId: "nid-1", sdp: "ANSWER"),
                      .addRemoteCandidate(c),
                      .remoteEndOfCandidates(negotiationId: "nid-1")])
    }

    @Test func rowsForOtherNegotiationsAreIgnored() {
        var h = Harness()
        _ = h.startApproved()
        // Ignored, but counted and logged (issue 8: every hostile row gets a logged rejection).
        #expect(h.send(.signal(.answer(sdp: "X", negotiationID: "old")))
                == [.rowIgnored(type: "answer", why: "other negotiation", total: 1)])
        #expect(h.send(.signal(.iceCandidate(IceCandidatePayload(negotiationID: "old", candidate: "candidate:x"))))
                == [.rowIgnored(type: "ice_candidate", why: "other negotiation", total: 2)])
        #expect(h.send(.signal(.endOfCandidates(negotiationID: "old")))
                == [.rowIgnored(type: "ice_candidate", why: "other negotiation", total: 3)])
        #expect(h.machine.ignoredRows == 3)
        // A second answer for the current negotiation is ignored too.
        h.send(.signal(.answer(sdp: "A", negotiationID: "nid-1")))
        #expect(h.send(.signal(.answer(sdp: "B", negotiationID: "nid-1")))
                == [.rowIgnored(type: "answer", why: "answer already applied", total: 4)])
    }

    @Test func rowsASenderNeverHandlesAreCountedAndLogged() {
        var h = Harness()
        _ = h.startApproved()
        #expect(h.send(.signal(.offer(sdp: "O", negotiationID: "nid-1")))
                == [.rowIgnored(type: "offer", why: "a sender does not handle it", total: 1)])
        #expect(h.send(.signal(.unknown(type: String(repeating: "t", count: 500))))
                == [.rowIgnored(type: String(repeating: "t", count: 64), why: "unknown type", total: 2)])
        #expect(h.send(.signal(.invalid(type: "answer", why: "no sdp")))
                == [.rowIgnored(type: "answer", why: "no sdp", total: 3)])
        #expect(h.send(.signal(.joinRequest(deviceName: nil)))
                == [.rowIgnored(type: "join_request", why: "a sender does not handle it", total: 4)])
    }

    @Test func connectedIsReportedOnceThenHeartbeatsEvery30s() {
        var h = Harness()
        _ = h.startApproved()
        h.connect()
        #expect(h.log.updates == [.connected])
        #expect(h.log.contains(.connected(negotiationId: "nid-1")))
        var a = h.advance(.seconds(29))
        #expect(a.updates.isEmpty)
        a = h.advance(.seconds(1))
        #expect(a.updates == [.heartbeat])
        a = h.advance(.seconds(90))
        #expect(a.updates == [.heartbeat, .heartbeat, .heartbeat])
    }

    @Test func heartbeatExtendsTheAuthorizationExpiry() {
        var h = Harness()
        _ = h.startApproved(authExpiresIn: .seconds(40))
        h.connect()
        h.advance(.seconds(30))
        h.send(.sessionUpdateFinished(.heartbeat, .ok(authExpiresAt: h.now + .seconds(7200))))
        let a = h.advance(.seconds(60))
        #expect(a.finish == nil)
    }

    @Test func authorizationExpiryStopsSignalingAndSaysPairAgain() {
        var h = Harness()
        _ = h.startApproved(authExpiresIn: .seconds(45))
        h.connect()
        let a = h.advance(.seconds(46))
        #expect(a.finish?.0 == SessionMachine.sessionOverExitCode)
        #expect(a.finish?.1 == "Authorization expired; pair again.")
        #expect(a.inserts.isEmpty)
        #expect(!a.updates.contains(.end))
        #expect(h.machine.isEnded)
    }

    @Test func heartbeat404EndsAsExpired() {
        var h = Harness()
        _ = h.startApproved()
        h.connect()
        h.advance(.seconds(30))
        let a = h.send(.sessionUpdateFinished(.heartbeat, .notFound))
        #expect(a.finish?.0 == SessionMachine.sessionOverExitCode)
        #expect(a.finish?.1 == "Authorization expired; pair again.")
    }

    @Test func answerThatCannotBeUsedEndsWithFailedAndTheReason() {
        var h = Harness()
        _ = h.startApproved()
        let a = h.send(.answerFailed(negotiationId: "nid-1", message: "the receiver cannot decode H.264"))
        #expect(a.inserts == [.disconnect(.failed)])
        #expect(a.updates == [.end])
        #expect(a.finish?.1.contains("cannot decode H.264") == true)
    }

    /// Issue 15: a receiver that decodes none of the offered codecs learns why from the
    /// disconnect row (shown raw by the receiver), and castd ends with exit code 1.
    @Test func noCommonCodecEndsWithItsOwnReasonAndExitCodeOne() {
        var h = Harness()
        _ = h.startApproved()
        let a = h.send(.noCommonCodec(negotiationId: "nid-1",
                                      message: "the receiver can decode none of castd's video codecs (H.264, VP8): it rejected the video m-line"))
        #expect(a.inserts == [.disconnect(.other("no_common_codec"))])
        #expect(a.updates == [.end])
        #expect(a.finish?.0 == 1)
        #expect(a.finish?.1.contains("none of castd's video codecs (H.264, VP8)") == true)
        // A stale negotiation's answer changes nothing.
        var g = Harness()
        _ = g.startApproved()
        #expect(g.send(.noCommonCodec(negotiationId: "old", message: "x")).inserts.isEmpty)
    }
}

@Suite struct ReconnectTests {
    @Test func failedReoffersAfter1s3s7sWithFreshNegotiationIdsThenGivesUp() {
        var h = Harness()
        _ = h.startApproved()
        h.connect()
        var created: [(Duration, String)] = []
        let start = h.now
        for attempt in 1...3 {
            let nid = h.machine.negotiationId!
            var a = h.send(.peerState(negotiationId: nid, .failed))
            #expect(a.contains(.closePeer))
            let lostAt = h.now
            // Step a millisecond at a time until the re-offer is created.
            while a.creates.isEmpty && h.now - lostAt < .seconds(10) { a = h.advance(.milliseconds(1)) }
            created.append((h.now - lostAt, a.creates.first ?? "none"))
            #expect(attempt <= 3)
        }
        #expect(created.map(\.0) == [.seconds(1), .seconds(3), .seconds(7)])
        #expect(created.map(\.1) == ["nid-2", "nid-3", "nid-4"])
        // The third re-offer fails too: give up.
        let a = h.send(.peerState(negotiationId: "nid-4", .failed))
        #expect(a.inserts == [.disconnect(.failed)])
        #expect(a.updates == [.end])
        #expect(a.finish?.0 == 1)
        #expect(h.now - start == .seconds(11))   // 1 s + 3 s + 7 s
    }

    @Test func successResetsTheAttemptCount() {
        var h = Harness()
        _ = h.startApproved()
        h.connect()
        for _ in 0..<5 {   // more losses than attempts, each followed by a success
            let nid = h.machine.negotiationId!
            h.send(.peerState(negotiationId: nid, .failed))
            let a = h.advance(.seconds(1))
            #expect(a.creates.count == 1)
            h.connect()
        }
        #expect(h.log.finish == nil)
    }

    @Test func disconnectedRecoversWithin5sWithoutReoffer() {
        var h = Harness()
        _ = h.startApproved()
        h.connect()
        h.send(.peerState(negotiationId: "nid-1", .disconnected))
        h.advance(.milliseconds(4900))
        h.send(.peerState(negotiationId: "nid-1", .connected))
        let a = h.advance(.seconds(20))
        #expect(a.creates.isEmpty)
        #expect(!a.contains(.closePeer))
    }

    @Test func disconnectedFor5sCountsAsLost() {
        var h = Harness()
        _ = h.startApproved()
        h.connect()
        h.send(.peerState(negotiationId: "nid-1", .disconnected))
        var a = h.advance(.milliseconds(4999))
        #expect(!a.contains(.closePeer))
        a = h.advance(.milliseconds(1))
        #expect(a.contains(.closePeer))
        a = h.advance(.seconds(1))
        #expect(a.creates == ["nid-2"])
    }

    @Test func anOfferThatNeverConnectsTimesOut() {
        var h = Harness()
        _ = h.startApproved()
        let a = h.advance(.seconds(21))
        #expect(a.contains(.closePeer))
        #expect(a.creates == ["nid-2"])
    }

    @Test func staleEventsFromAClosedPeerAreIgnored() {
        var h = Harness()
        _ = h.startApproved()
        h.connect()
        h.send(.peerState(negotiationId: "nid-1", .failed))
        h.advance(.seconds(1))
        #expect(h.send(.peerState(negotiationId: "nid-1", .connected)).isEmpty)
        #expect(h.send(.offerReady(negotiationId: "nid-1", sdp: "late")).isEmpty)
    }

    @Test func queuedRowsOfAnAbandonedNegotiationAreNotSent() {
        var h = Harness()
        _ = h.startApproved()
        h.send(.offerReady(negotiationId: "nid-1", sdp: "OFFER"))      // in flight
        h.send(.localCandidate(IceCandidatePayload(negotiationID: "nid-1", candidate: "candidate:a")))
        h.send(.peerState(negotiationId: "nid-1", .failed))
        let a = h.send(.insertFinished(.inserted))
        #expect(a.inserts.isEmpty)
    }
}

@Suite struct EndingTests {
    @Test func stopSendsDisconnectSenderEndedThenEndThenExits0() {
        var h = Harness()
        _ = h.startApproved()
        h.connect()
        let a = h.send(.stopRequested)
        #expect(a == [.stopMedia, .closePeer, .insert(.disconnect(.senderEnded)),
                      .sessionUpdate(.end), .finish(exitCode: 0, message: "Cast stopped.")])
        #expect(h.machine.nextDeadline() == nil)
        #expect(h.send(.peerState(negotiationId: "nid-1", .failed)).isEmpty)
    }

    @Test func captureNeedingAPersonEndsWithItsReasonAndExit1() {
        var h = Harness()
        _ = h.startApproved()
        let sentence = "ScreenCast portal: nobody accepted the dialog."
        let a = h.send(.captureNeedsUser(sentence))
        #expect(a == [.stopMedia, .closePeer, .insert(.disconnect(.other("capture_needs_user"))),
                      .sessionUpdate(.end), .finish(exitCode: 1, message: sentence)])
        #expect(h.machine.isEnded && h.machine.nextDeadline() == nil)
        // Nothing after the end: no reconnect, no second disconnect row.
        #expect(h.send(.captureNeedsUser(sentence)).isEmpty)
        #expect(h.send(.peerState(negotiationId: "nid-1", .failed)).isEmpty)
    }

    /// Issue 31: the shared window closed: a clean end (exit 0) whose disconnect row says why.
    @Test func theSharedWindowClosingEndsTheCastCleanlyWithItsReason() {
        var h = Harness()
        _ = h.startApproved()
        h.connect()
        let a = h.send(.sourceEnded("the shared window 'Slides' was closed, so the cast ended"))
        #expect(a.filter { if case .log = $0 { return false }; return true }
                == [.stopMedia, .closePeer, .insert(.disconnect(.other("shared_window_closed"))), .sessionUpdate(.end),
                    .finish(exitCode: 0, message: "The shared window 'Slides' was closed, so the cast ended.")])
        #expect(h.machine.isEnded)
        #expect(h.send(.sourceEnded("again")).isEmpty)
    }

    @Test func receiverStopEndsCleanlyWithItsSentence() {
        var h = Harness()
        _ = h.startApproved()
        h.connect()
        let a = h.send(.signal(.disconnect(DisconnectReason(raw: "receiver_ended"))))
        #expect(a.finish?.0 == 0)
        #expect(a.finish?.1 == "The receiver ended the session.")
        #expect(a.inserts.isEmpty)
        #expect(a.contains(.stopMedia))
    }

    @Test func statusDisconnectedWithoutARowEndsAfterTheGrace() {
        var h = Harness()
        _ = h.startApproved()
        h.connect()
        var a = h.send(.statusChanged(.disconnected))
        #expect(a.contains(.stopMedia) && a.contains(.closePeer))   // capture stops at once
        #expect(a.finish == nil)
        a = h.advance(.milliseconds(999))
        #expect(a.finish == nil)
        a = h.advance(.milliseconds(1))
        #expect(a.finish?.1 == "The broadcasting session has ended.")
        #expect(a.finish?.0 == 0)
    }

    @Test func statusFirstThenRowReportsTheRowsReason() {
        var h = Harness()
        _ = h.startApproved()
        h.connect()
        h.send(.statusChanged(.disconnected))
        h.advance(.milliseconds(300))
        let a = h.send(.signal(.disconnect(.receiverEnded)))
        #expect(a.finish?.1 == "The receiver ended the session.")
        #expect(!a.contains(.stopMedia))   // already stopped
        #expect(h.machine.isEnded)
    }

    @Test func unknownReasonIsShownRawButSanitised() {
        var h = Harness()
        _ = h.startApproved()
        let a = h.send(.signal(.disconnect(DisconnectReason(raw: "kicked\u{1b}[31m"))))
        #expect(a.finish?.1 == "The receiver ended the session (reason: kicked[31m).")
    }
}

@Suite struct OutboxTests {
    @Test func budgetHoldsRowsUntilTheWindowFrees() {
        var o = SignalingOutbox<Int>(limit: 3, window: .seconds(60))
        for i in 0..<5 { o.enqueue(i) }
        var sent: [Int] = []
        var t = Instant.zero
        for _ in 0..<3 {
            if let r = o.next(now: t) { sent.append(r); o.completed(.inserted, now: t) }
            t = t + .seconds(1)
        }
        #expect(sent == [0, 1, 2])
        #expect(o.next(now: t) == nil)
        #expect(o.nextDeadline() == Instant.zero + .seconds(60))
        #expect(o.next(now: .zero + .seconds(60)) == 3)
    }

    @Test func rateLimitedRowIsRetriedFirstAfterAGrowingBackoff() {
        var o = SignalingOutbox<String>(limit: 100, window: .seconds(60))
        o.enqueue("a"); o.enqueue("b")
        #expect(o.next(now: .zero) == "a")
        o.completed(.rateLimited, now: .zero)
        #expect(o.next(now: .zero + .seconds(1)) == nil)
        #expect(o.nextDeadline() == .zero + .seconds(2))
        #expect(o.next(now: .zero + .seconds(2)) == "a")
        o.completed(.rateLimited, now: .zero + .seconds(2))
        #expect(o.nextDeadline() == .zero + .seconds(6))
        #expect(o.next(now: .zero + .seconds(6)) == "a")
        o.completed(.inserted, now: .zero + .seconds(6))
        #expect(o.next(now: .zero + .seconds(6)) == "b")
        #expect(o.rateLimitedAnswers == 2)
    }

    @Test func tooLargeIsDroppedNotRetried() {
        var o = SignalingOutbox<String>()
        o.enqueue("huge"); o.enqueue("next")
        _ = o.next(now: .zero)
        o.completed(.tooLarge, now: .zero)
        #expect(o.next(now: .zero) == "next")
        #expect(o.droppedAsTooLarge == 1)
    }

    @Test func machineNeverExceedsItsRowBudgetUnderACandidateStorm() {
        var config = SessionMachine.Configuration()
        config.rowLimit = 10
        var h = Harness(configuration: config)
        _ = h.startApproved()
        h.send(.offerReady(negotiationId: "nid-1", sdp: "O"))
        h.send(.insertFinished(.inserted))     // the offer (t = 0)
        h.send(.signal(.answer(sdp: "A", negotiationID: "nid-1")))
        h.send(.peerState(negotiationId: "nid-1", .connected))
        var first: [SessionMachine.Action] = []
        for i in 0..<50 {
            first += h.send(.localCandidate(IceCandidatePayload(negotiationID: "nid-1", candidate: "candidate:\(i)")))
        }
        var times: [Instant] = []
        // Ack each insert at the moment it is asked for; advance 100 ms at a time for 3 minutes.
        var a = first
        for _ in 0..<1800 {
            while let i = a.firstIndex(where: { if case .insert = $0 { return true }; return false }) {
                times.append(h.now)
                a.remove(at: i)
                a += h.send(.insertFinished(.inserted))
            }
            a = h.advance(.milliseconds(100))
        }
        // Offer was sent at t=0 (in the log before the loop); count every 60 s window.
        let all = [Instant.zero] + times
        for t in all {
            #expect(all.filter { $0 >= t && $0 - t < .seconds(60) }.count <= 10)
        }
        #expect(all.count == 30)   // 3 windows of 10
    }
}

/// Issue 17: rows a sender does not expect are ignored and counted, never trusted.
@Suite struct UnexpectedRowTests {
    @Test func aSecondApprovalMidCastIsIgnoredAndDoesNotMoveTheExpiry() {
        var h = Harness()
        _ = h.startApproved(authExpiresIn: .seconds(7200))
        h.connect()
        let before = h.machine.nextDeadline()
        let a = h.send(.approved(authExpiresAt: Instant(nanoseconds: .max), prefs: StreamPrefs(frameRate: 1)))
        #expect(a.contains(.rowIgnored(type: "join_approved", why: "already approved", total: 1)))
        #expect(!a.contains(where: { if case .startMedia = $0 { return true }; return false }))
        #expect(h.machine.nextDeadline() == before)
        // The original authorization still ends the cast at its time.
        let end = h.advance(.seconds(7201))
        #expect(end.finish?.1 == "Authorization expired; pair again.")
    }

    @Test func anApprovalThatNeverExpiresKeepsCasting() {
        var h = Harness()
        _ = h.startApproved(authExpiresIn: .seconds(1) * 1_000_000_000_000)   // saturates
        h.connect()
        let a = h.advance(.seconds(3600))
        #expect(a.finish == nil)
        #expect(a.updates.contains(.heartbeat))
    }

    @Test func rowsOfTheReceiversOwnRoleAreCountedNotActedOn() {
        var h = Harness()
        _ = h.startApproved()
        h.connect()
        let a = h.send(.signal(.offer(sdp: "v=0", negotiationID: "x")))
        let b = h.send(.signal(.joinRequest(deviceName: "evil")))
        #expect(a == [.rowIgnored(type: "offer", why: "a sender does not handle it", total: 1)])
        #expect(b == [.rowIgnored(type: "join_request", why: "a sender does not handle it", total: 2)])
        #expect(h.machine.ignoredRows == 2)
    }
}

@Suite struct PermanentEndTests {
    @Test func theReceiverGivingUpIsAPermanentEnd() {
        var h = Harness()
        _ = h.startApproved()
        h.connect()
        let a = h.send(.signal(.disconnect(.failed)))
        #expect(a.finish?.0 == SessionMachine.sessionOverExitCode)
    }
}

/// Issue 17: a media failure reopens the media a bounded number of times, then ends the cast.
@Suite struct MediaFailureTests {
    @Test func aFailureStopsTheMediaAndStartsItAgainAfterTheBackoff() {
        var h = Harness()
        _ = h.startApproved()
        h.connect()
        let a = h.send(.mediaFailed("encoding failed: x"))
        #expect(a.contains(.stopMedia))
        #expect(h.machine.activity == .restartingMedia)
        #expect(h.machine.mediaRunning == false)
        #expect(h.advance(.milliseconds(999)).isEmpty)
        let b = h.advance(.milliseconds(1))
        #expect(b.contains(.startMedia(Harness.prefs)))
        #expect(h.machine.activity == .connected && h.machine.mediaRunning)
        #expect(b.finish == nil && b.inserts.isEmpty)   // the peer and the session are untouched
    }

    @Test func pastTheRestartsTheCastEndsWithAReasonAndASentence() {
        var h = Harness()
        _ = h.startApproved()
        h.connect()
        var delays: [Duration] = []
        for _ in 0..<3 {
            h.send(.mediaFailed("the encoder could not start: no"))
            let failedAt = h.now
            while !h.advance(.milliseconds(100)).contains(.startMedia(Harness.prefs)) {}
            delays.append(h.now - failedAt)
        }
        #expect(delays == [.seconds(1), .seconds(2), .seconds(4)])
        let end = h.send(.mediaFailed("the encoder could not start: no"))
        #expect(end.inserts == [.disconnect(SessionMachine.mediaFailedReason)])
        #expect(end.updates == [.end])
        #expect(end.finish?.0 == 1)
        #expect(end.finish?.1 == "The screen could not be captured or encoded (the encoder could not start: no); gave up after 3 restarts.")
    }

    @Test func failuresOlderThanTheWindowAreForgotten() {
        var h = Harness()
        _ = h.startApproved(authExpiresIn: .seconds(100_000))
        h.connect()
        for _ in 0..<6 {
            h.send(.mediaFailed("stall"))
            h.advance(.seconds(61))   // restarts after 1 s, then runs for a minute
            #expect(h.machine.mediaRunning)
        }
        #expect(!h.machine.isEnded)
    }

    @Test func aFailureWhileMediaIsStoppedIsIgnored() {
        var h = Harness()
        h.send(.ready(status: .pairing))
        let a = h.send(.mediaFailed("late report"))
        #expect(!a.contains(.stopMedia) && a.finish == nil)
        #expect(h.machine.activity == .waitingForApproval)
    }
}

/// Issue 19: the machine's log events are typed, each with its own name, level and fields
/// (no pre-formatted text for the shell to wrap).
@Suite struct SessionLogEventTests {
    @Test func negotiatingLogsItsOwnEventWithTheNegotiationAndAttempt() {
        var h = Harness()
        let a = h.startApproved()
        #expect(a.events == [LogLine(.info, "negotiate", [("negotiation", "nid-1"), ("attempt", 0)])])
    }

    @Test func aLostConnectionLogsReconnectAtNoticeThenANewNegotiation() {
        var h = Harness()
        _ = h.startApproved()
        h.connect()
        let lost = h.send(.peerState(negotiationId: "nid-1", .failed))
        #expect(lost.events == [LogLine(.notice, "reconnect", [("attempt", 1), ("delay_s", 1.0)])])
        let again = h.advance(.seconds(1))
        #expect(again.events == [LogLine(.info, "negotiate", [("negotiation", "nid-2"), ("attempt", 1)])])
    }

    @Test func timeoutsAreWarningsNamingTheNegotiation() {
        var h = Harness()
        _ = h.startApproved()
        let a = h.advance(.seconds(20))
        #expect(a.events.first == LogLine(.warning, "negotiation_timeout", [("negotiation", "nid-1")]))
        #expect(a.events.dropFirst().first?.event == "reconnect")
    }

    @Test func aMediaFailureIsAWarningAndItsRestartANotice() throws {
        var h = Harness()
        _ = h.startApproved()
        h.connect()
        let a = h.send(.mediaFailed("encoding failed: \"x\"\nlevel=error event=forged"))
        let failed = try #require(a.events.first)
        #expect(failed.level == .warning && failed.event == "media_failed")
        // The remote-ish sentence is one printable field: no quote, no newline, no second event.
        #expect(failed["reason"] == "encoding failed: xlevel=error event=forged")
        #expect(failed["restart"] == "1" && failed["delay_s"] == "1.0")
        #expect(try LogLine.parse(failed.description) == failed)
        #expect(h.advance(.seconds(1)).events == [LogLine(.notice, "media_restart")])
    }

    @Test func rowOutcomesAreLoggedWithTheirLevels() {
        var h = Harness()
        _ = h.startApproved()
        let nid = h.machine.negotiationId!
        _ = h.send(.offerReady(negotiationId: nid, sdp: "v=0"))
        let big = h.send(.insertFinished(.tooLarge))
        #expect(big.events.map(\.level) == [.error])
        #expect(big.events.first?.event == "signaling_row_too_large")
        #expect(big.events.first?["sqlstate"] == "54000")
        h.send(.gatheringComplete(negotiationId: nid))
        let limited = h.send(.insertFinished(.rateLimited))
        #expect(limited.events == [LogLine(.warning, "signaling_rate_limited", [("sqlstate", "P0429"), ("note", "backing off")])])
    }
}
