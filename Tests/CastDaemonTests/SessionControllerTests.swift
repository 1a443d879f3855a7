import Testing
import CastCore
import CastSession
import CastSignaling
@testable import CastDaemon

/// In-memory ports: a receiver that answers every offer, a peer that
/// "connects" as soon as it has an answer. They record what castd did.
actor Recorder {
    var inserted: [OutgoingSignal] = []
    var updates: [SessionUpdateAction] = []
    var peerCalls: [String] = []
    var media: [String] = []
    var order: [String] = []
    func insert(_ r: OutgoingSignal) { inserted.append(r) }
    func insertDone(_ r: OutgoingSignal) { order.append("inserted \(r.messageType)") }
    func update(_ a: SessionUpdateAction) { updates.append(a); order.append("update \(a.rawValue)") }
    func peer(_ s: String) { peerCalls.append(s) }
    func mediaCall(_ s: String) { media.append(s) }
}

struct FakeSignaling: SignalingPort {
    let recorder: Recorder
    let stream: AsyncStream<SessionMachine.Input>
    let continuation: AsyncStream<SessionMachine.Input>.Continuation
    var answerOffers = true

    init(recorder: Recorder, backfill: [SessionMachine.Input]) {
        self.recorder = recorder
        (stream, continuation) = AsyncStream.makeStream(of: SessionMachine.Input.self)
        for b in backfill { continuation.yield(b) }
    }

    func events() -> AsyncStream<SessionMachine.Input> { stream }

    func insert(_ row: OutgoingSignal) async -> SignalingOutbox<OutgoingSignal>.Outcome {
        await recorder.insert(row)
        // A slow backend: the disconnect row takes a while to go in.
        if case .disconnect = row { try? await Task.sleep(for: .milliseconds(100)) }
        await recorder.insertDone(row)
        if answerOffers, case .offer(_, let nid) = row {
            continuation.yield(.signal(.answer(sdp: "answer-for-\(nid)", negotiationID: nid)))
        }
        return .inserted
    }

    func sessionUpdate(_ action: SessionUpdateAction) async -> SessionUpdateResult {
        await recorder.update(action)
        return .ok(authExpiresAt: nil)
    }

    func close() async { continuation.finish() }
}

final class FakePeer: PeerPort, @unchecked Sendable {
    let recorder: Recorder
    // Only touched from the controller actor's calls, one at a time.
    private var current: (String, AsyncStream<SessionMachine.Input>.Continuation)?
    init(recorder: Recorder) { self.recorder = recorder }

    func create(negotiationId: String) async -> AsyncStream<SessionMachine.Input> {
        await recorder.peer("create \(negotiationId)")
        let (s, c) = AsyncStream.makeStream(of: SessionMachine.Input.self)
        current = (negotiationId, c)
        c.yield(.offerReady(negotiationId: negotiationId, sdp: "offer-\(negotiationId)"))
        c.yield(.localCandidate(IceCandidatePayload(negotiationID: negotiationId, candidate: "candidate:1 1 udp 9 127.0.0.1 4000 typ host")))
        c.yield(.gatheringComplete(negotiationId: negotiationId))
        return s
    }

    func applyAnswer(negotiationId: String, sdp: String) async -> SessionMachine.Input? {
        await recorder.peer("answer \(sdp)")
        current?.1.yield(.peerState(negotiationId: negotiationId, .connected))
        return nil
    }

    func addRemoteCandidate(_ candidate: IceCandidatePayload) async {}
    func remoteEndOfCandidates(negotiationId: String) async {}
    func close() async {
        await recorder.peer("close")
        current?.1.finish()
    }
}

struct FakeMedia: MediaPort {
    let recorder: Recorder
    func start(_ prefs: StreamPrefs) async { await recorder.mediaCall("start \(prefs.resolution ?? "-")@\(prefs.frameRate ?? 0)") }
    func stop() async { await recorder.mediaCall("stop") }
}

struct NullSink: LogSink { func write(_ line: LogLine) {} }

@Suite struct SessionControllerTests {
    /// A cast on fakes, approved with `prefs` in a `connecting` session; once connected, `then` gets the controller.
    static func cast(_ rec: Recorder, nid: String, prefs: StreamPrefs = StreamPrefs(), authFor: Duration? = nil,
                     then: @escaping @Sendable (SessionController) -> Void) async -> SessionController.Outcome {
        let clock = SystemMonotonicClock()
        let signaling = FakeSignaling(recorder: rec, backfill: [
            .approved(authExpiresAt: authFor.map { clock.now() + $0 }, prefs: prefs),
            .ready(status: .connecting),
        ])
        final class Box: @unchecked Sendable { var controller: SessionController? }
        let box = Box()
        let controller = SessionController(
            machine: SessionMachine { nid }, signaling: signaling, peer: FakePeer(recorder: rec),
            media: FakeMedia(recorder: rec), clock: clock, log: NullSink(),
            onConnected: { _ in box.controller.map(then) })
        box.controller = controller
        return await controller.run()
    }

    @Test func castsUntilStoppedThenSendsDisconnectAndEnd() async {
        let rec = Recorder()
        let outcome = await Self.cast(rec, nid: "nid-fixed", prefs: StreamPrefs(resolution: "720p", frameRate: 30),
                                      authFor: .seconds(3600)) { $0.requestStop() }

        #expect(outcome == .init(exitCode: 0, message: "Cast stopped."))
        let inserted = await rec.inserted
        #expect(inserted.first == .offer(sdp: "offer-nid-fixed", negotiationID: "nid-fixed"))
        #expect(inserted.last == .disconnect(.senderEnded))
        #expect(await rec.updates == [.connected, .end])
        #expect(await rec.media == ["start 720p@30", "stop"])
        // The disconnect row is in before `end` is asked for (RLS refuses rows once the session ended).
        let order = await rec.order
        let inserted_ = order.firstIndex(of: "inserted disconnect"), end = order.firstIndex(of: "update end")
        #expect(inserted_ != nil && end != nil && inserted_! < end!)
        let calls = await rec.peerCalls
        #expect(calls.first == "create nid-fixed")
        #expect(calls.contains("answer answer-for-nid-fixed"))
        #expect(calls.last == "close")
    }

    @Test func receiverStopEndsTheRunWithExit0AndNoRows() async {
        let rec = Recorder()
        let clock = SystemMonotonicClock()
        let signaling = FakeSignaling(recorder: rec, backfill: [
            .approved(authExpiresAt: nil, prefs: StreamPrefs()),
            .ready(status: .connected),
        ])
        let controller = SessionController(
            machine: SessionMachine { "n1" }, signaling: signaling, peer: FakePeer(recorder: rec),
            media: FakeMedia(recorder: rec), clock: clock, log: NullSink(),
            onConnected: { _ in signaling.continuation.yield(.signal(.disconnect(DisconnectReason(raw: "receiver_ended")))) })
        let outcome = await controller.run()
        #expect(outcome == .init(exitCode: 0, message: "The receiver ended the session."))
        #expect(await rec.inserted.contains(.disconnect(.senderEnded)) == false)
        #expect(await rec.updates == [.connected])
    }

    /// The media side reports that capture waits for a person (the portal's dialog): the cast ends with
    /// disconnect `capture_needs_user`, then `end`, media stopped, and exit 1 with the media's sentence.
    @Test func captureNeedingAPersonEndsTheRunWithItsReasonAndExit1() async {
        let rec = Recorder()
        let outcome = await Self.cast(rec, nid: "n1") { $0.captureNeedsUser("Nobody accepted the dialog.") }
        #expect(outcome == .init(exitCode: 1, message: "Nobody accepted the dialog."))
        #expect(await rec.inserted.last == .disconnect(.other("capture_needs_user")))
        #expect(await rec.updates == [.connected, .end])
        #expect(await rec.media.last == "stop")
    }
}

/// Which of the two ends the wait: no wall-clock bounds (a loaded machine
/// delays tasks by seconds), only which side finished first.
@Suite struct EndBudgetTests {
    @Test func finalWorkThatHangsIsAbandonedAfterTheBudget() async {
        let hang = Task { try? await Task.sleep(for: .seconds(3600)) }
        let finished = await SessionController.waitAll([Task { await hang.value }], atMost: .milliseconds(50))
        hang.cancel()
        #expect(finished == false)
    }

    @Test func finishedWorkReturnsWithoutWaitingForTheBudget() async {
        // With an hour of budget, returning at all means the work ended the wait.
        let finished = await SessionController.waitAll([Task {}], atMost: .seconds(3600))
        #expect(finished == true)
    }
}
