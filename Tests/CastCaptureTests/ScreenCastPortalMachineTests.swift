import CastCore
import SansIOContract
import Testing
@testable import CastCapture

struct ScreenCastPortalMachineTests {
    let base = "/org/freedesktop/portal/desktop/request/1_42/"

    func response(_ m: inout ScreenCastPortalMachine, _ path: String, code: UInt32 = 0, session: String? = nil,
                  streams: [PortalStream] = [], token: String? = nil) -> ScreenCastPortalMachine.Action? {
        m.step(.response(path: path, code: code, sessionHandle: session, streams: streams, restoreToken: token))
    }

    @Test func theHappyPathInOrderWithTheRequestPathsPredicted() {
        var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 7, restoreToken: "old-token", tokenPrefix: "castd 9")
        #expect(m.step(.begin) == .call(.createSession(handleToken: "castd_9_1", sessionHandleToken: "castd_9_2"),
                                   expect: base + "castd_9_1"))
        let session = "/org/freedesktop/portal/desktop/session/1_42/castd_9_2"
        #expect(response(&m, base + "castd_9_1", session: session)
                == .call(.selectSources(session: session, handleToken: "castd_9_3", types: 1, cursorMode: 4,
                                        persistMode: 2, restoreToken: "old-token"), expect: base + "castd_9_3"))
        #expect(response(&m, base + "castd_9_3") == .call(.start(session: session, handleToken: "castd_9_4"), expect: base + "castd_9_4"))
        let stream = PortalStream(node: 57, width: 1920, height: 1080, sourceType: 1)
        #expect(response(&m, base + "castd_9_4", streams: [stream], token: "new-token")
                == .call(.openPipeWireRemote(session: session), expect: nil))
        #expect(m.step(.remoteOpened) == .finished(PortalGrant(sessionHandle: session, streams: [stream], restoreToken: "new-token",
                                                                 cursorMode: .metadata, offeredRestoreToken: true)))
        // Anything afterwards is ignored.
        #expect(m.timeout() == nil)
    }

    /// Issue 31: `--source window` asks the dialog for a window (types 2), monitor for a monitor (1).
    @Test func selectSourcesAsksForTheSourceTypeGiven() {
        for (type, bits) in [(PortalSourceType.window, UInt32(2)), (.monitor, 1)] {
            var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 4, restoreToken: nil, tokenPrefix: "t",
                                            sourceTypes: type.rawValue)
            _ = m.step(.begin)
            #expect(response(&m, base + "t_1", session: "/s")
                    == .call(.selectSources(session: "/s", handleToken: "t_3", types: bits, cursorMode: 4,
                                            persistMode: 2, restoreToken: nil), expect: base + "t_3"))
        }
    }

    /// xdg-desktop-portal-wlr 0.7 says source_type 2 (window) for the monitor it casts when only monitors were
    /// asked for (seen on the Sway rig): the grant says monitor and keeps what the portal said.
    @Test func aSourceTypeThatWasNotAskedForIsTakenAsTheOneAskedFor() {
        var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 2, restoreToken: nil, tokenPrefix: "t")
        _ = m.step(.begin)
        _ = response(&m, base + "t_1", session: "/s")
        _ = response(&m, base + "t_3")
        _ = response(&m, base + "t_4", streams: [PortalStream(node: 7, width: 1280, height: 720, sourceType: 2, x: 0, y: 0)])
        guard case .finished(let g)? = m.step(.remoteOpened) else { Issue.record("not finished"); return }
        #expect(g.streams[0].sourceType == 1 && g.streams[0].reportedSourceType == 2)
        #expect(g.streams[0].described == "monitor 1280x720 at 0,0")
        // As asked, or asked for either (types 3): the portal's word stands.
        let asked = PortalStream(node: 7, sourceType: 1)
        #expect(ScreenCastPortalMachine.asAskedFor(asked, types: 1) == asked)
        let either = PortalStream(node: 7, sourceType: 2)
        #expect(ScreenCastPortalMachine.asAskedFor(either, types: 3) == either)
        #expect(ScreenCastPortalMachine.asAskedFor(PortalStream(node: 7), types: 1) == PortalStream(node: 7))
    }

    @Test func cursorModeIsMetadataWhenOfferedElseEmbedded() {
        #expect(PortalCursorMode.choose(available: 4) == .metadata)
        #expect(PortalCursorMode.choose(available: 3) == .embedded)
        #expect(PortalCursorMode.choose(available: 1) == .hidden)
        #expect(PortalCursorMode.choose(available: 0) == .hidden)
    }

    @Test func noSavedTokenMeansNoneOffered() {
        var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 2, restoreToken: "", tokenPrefix: "t")
        _ = m.step(.begin)
        guard case .call(.selectSources(_, _, _, let cursor, _, let token), _)? = response(&m, base + "t_1", session: "/s") else {
            Issue.record("expected SelectSources")
            return
        }
        #expect(token == nil)
        #expect(cursor == 2)
    }

    @Test func responsesOfOtherRequestsAreIgnored() {
        var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 4, restoreToken: nil, tokenPrefix: "t")
        _ = m.step(.begin)
        #expect(response(&m, base + "someone_else", session: "/s") == nil)
        #expect(m.step == .creatingSession)
    }

    @Test func aReturnedHandleThatDiffersFromThePredictionIsFollowed() {
        var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 4, restoreToken: nil, tokenPrefix: "t")
        _ = m.step(.begin)
        #expect(m.step(.requested(path: "/old/style/request/7")) == nil)
        #expect(response(&m, base + "t_1", session: "/s") == nil)
        guard case .call(.selectSources, _)? = response(&m, "/old/style/request/7", session: "/s") else {
            Issue.record("expected SelectSources")
            return
        }
    }

    @Test func cancelInTheDialogClosesTheSessionAndSaysSo() {
        var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 4, restoreToken: nil, tokenPrefix: "t")
        _ = m.step(.begin)
        _ = response(&m, base + "t_1", session: "/s")
        _ = response(&m, base + "t_3")
        guard case .closeAndFail(.closeSession(session: "/s"), let sentence)? = response(&m, base + "t_4", code: 1) else {
            Issue.record("expected close and fail")
            return
        }
        #expect(sentence == "ScreenCast portal: screen sharing was cancelled in the portal's dialog (Start).")
        #expect(m.step(.remoteOpened) == nil)
    }

    @Test func aRefusedTokenIsDroppedAndThePortalAskedAgainOnce() {
        var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 4, restoreToken: "tok", tokenPrefix: "t")
        _ = m.step(.begin)
        _ = response(&m, base + "t_1", session: "/s")
        _ = response(&m, base + "t_3")
        #expect(response(&m, base + "t_4", code: 2) == .call(.closeSession(session: "/s"), expect: nil))
        #expect(m.restoreToken == nil)
        #expect(m.step(.sessionClosed) == .call(.createSession(handleToken: "t_5", sessionHandleToken: "t_6"), expect: base + "t_5"))
        guard case .call(.selectSources(_, _, _, _, _, let token), _)? = response(&m, base + "t_5", session: "/s2") else {
            Issue.record("expected SelectSources"); return
        }
        #expect(token == nil)
        _ = response(&m, base + "t_7")
        _ = response(&m, base + "t_8", streams: [PortalStream(node: 3)], token: "fresh")
        guard case .finished(let g)? = m.step(.remoteOpened) else { Issue.record("expected a grant"); return }
        #expect(g.refusedRestoreToken && !g.offeredRestoreToken && g.restoreToken == "fresh" && g.sessionHandle == "/s2")
    }

    @Test func aSecondFailureAfterDroppingTheTokenFailsInWords() {
        var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 4, restoreToken: "tok", tokenPrefix: "t")
        _ = m.step(.begin)
        _ = response(&m, base + "t_1", session: "/s")
        _ = response(&m, base + "t_3")
        _ = response(&m, base + "t_4", code: 2)
        _ = m.step(.sessionClosed)
        _ = response(&m, base + "t_5", session: "/s2")
        _ = response(&m, base + "t_7")
        guard case .closeAndFail(.closeSession("/s2"), let sentence)? = response(&m, base + "t_8", code: 2) else {
            Issue.record("expected failure"); return
        }
        #expect(sentence.contains("response 2") && sentence.contains("after dropping the saved restore token"))
        #expect(!sentence.contains("tok."))   // the token itself never appears in messages
    }

    @Test func errorsBeforeASessionDoNotClose() {
        var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 4, restoreToken: nil, tokenPrefix: "t")
        _ = m.step(.begin)
        #expect(m.step(.callFailed("org.freedesktop.DBus.Error.ServiceUnknown: no portal"))
                == .failed("ScreenCast portal: the ScreenCast portal refused CreateSession: org.freedesktop.DBus.Error.ServiceUnknown: no portal."))
    }

    @Test func aTimeoutExplainsTheMissingHuman() {
        var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 4, restoreToken: nil, tokenPrefix: "t")
        _ = m.step(.begin)
        _ = response(&m, base + "t_1", session: "/s")
        _ = response(&m, base + "t_3")
        guard case .closeAndFail(_, let sentence)? = m.timeout() else { Issue.record("expected failure"); return }
        #expect(sentence.contains("did not answer Start in time"))
        #expect(sentence.contains("dialog"))
    }

    /// The Response wait on a fake clock: a Start nobody answers (the dialog waits for a person)
    /// times out exactly at the deadline, and only then the machine says a person is needed.
    @Test func anUnansweredStartNeedsAUserAfterTheTimeoutAndNotBefore() {
        let clock = ManualClock(Instant(nanoseconds: 5_000_000_000))
        var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 4, restoreToken: "stale", tokenPrefix: "t",
                                        responseTimeout: .seconds(60))
        #expect(m.nextDeadline() == nil)   // not begun: nothing to wait for
        _ = m.step(.begin, now: clock.now())
        _ = response(&m, base + "t_1", session: "/s")
        _ = response(&m, base + "t_3")   // Start goes out
        clock.advance(by: .seconds(2))
        #expect(m.step(.requested(path: base + "t_4"), now: clock.now()) == nil)   // ... and returned: the wait starts now
        let due = clock.now() + .seconds(60)
        #expect(m.nextDeadline() == due)
        #expect(response(&m, base + "someone_else") == nil)   // another request's signal does not move it
        #expect(m.nextDeadline() == due)
        clock.advance(by: .milliseconds(59_999))
        m.handleTimeout(now: clock.now())
        #expect(m.poll() == nil)
        #expect(!m.needsUser)
        clock.advance(by: .milliseconds(1))
        m.handleTimeout(now: clock.now())
        guard case .closeAndFail(.closeSession(session: "/s"), let sentence)? = m.poll() else {
            Issue.record("expected the session closed and a failure"); return
        }
        #expect(m.poll() == nil && m.nextDeadline() == nil)
        #expect(m.needsUser)
        #expect(sentence.contains("nobody is there") && sentence.contains("did not accept the saved restore token"))
        #expect(!sentence.contains("stale"))   // the token itself never appears
    }

    /// Each call answered by a Response waits afresh, from when it returned.
    @Test func eachCallRestartsTheWaitFromItsReply() {
        var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 4, restoreToken: nil, tokenPrefix: "t",
                                        responseTimeout: .seconds(60))
        let t0 = Instant(nanoseconds: 1_000_000_000)
        _ = m.step(.begin, now: t0)
        #expect(m.nextDeadline() == t0 + .seconds(60))
        _ = m.step(.requested(path: nil), now: t0 + .seconds(1))
        #expect(m.nextDeadline() == t0 + .seconds(61))
        _ = m.step(.response(path: base + "t_1", code: 0, sessionHandle: "/s", streams: [], restoreToken: nil), now: t0 + .seconds(30))
        #expect(m.nextDeadline() == t0 + .seconds(90))   // SelectSources decided
        _ = m.step(.requested(path: nil), now: t0 + .seconds(31))
        #expect(m.nextDeadline() == t0 + .seconds(91))
        _ = m.step(.response(path: base + "t_3", code: 0, sessionHandle: nil, streams: [], restoreToken: nil), now: t0 + .seconds(32))
        _ = m.step(.response(path: base + "t_4", code: 0, sessionHandle: nil, streams: [PortalStream(node: 3)], restoreToken: nil),
                   now: t0 + .seconds(33))
        #expect(m.nextDeadline() == nil)   // OpenPipeWireRemote answers by its own reply
    }

    @Test func aTimeoutBeforeStartIsNotADialog() {
        var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 4, restoreToken: nil, tokenPrefix: "t")
        _ = m.step(.begin)
        guard case .failed(let sentence)? = m.timeout() else { Issue.record("expected failure"); return }
        #expect(!m.needsUser)
        #expect(sentence.contains("CreateSession"))
    }

    @Test func aStartWithoutStreamsFails() {
        var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 4, restoreToken: nil, tokenPrefix: "t")
        _ = m.step(.begin)
        _ = response(&m, base + "t_1", session: "/s")
        _ = response(&m, base + "t_3")
        guard case .closeAndFail(_, let sentence)? = response(&m, base + "t_4", streams: []) else { Issue.record("expected failure"); return }
        #expect(sentence.contains("no stream"))
    }
}

/// The portal machine keeps the one sans-IO contract (`SansIO` in CastCore); its one deadline is
/// the wait for the expected Response.
@Suite struct ScreenCastPortalMachineContractTests {
    let base = "/org/freedesktop/portal/desktop/request/1_42/"
    let t0 = Instant(nanoseconds: 4_000_000_000)

    func make() -> ScreenCastPortalMachine {
        ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 4, restoreToken: nil, tokenPrefix: "t", responseTimeout: .seconds(60))
    }

    @Test func theSharedContractHolds() {
        // CreateSession and SelectSources answered, Start returned and unanswered: the wait is the deadline.
        let v = SansIOContract.violations(make, inputs: [
            (.begin, t0), (.requested(path: nil), t0 + .milliseconds(2)),
            (.response(path: base + "t_1", code: 0, sessionHandle: "/s", streams: [], restoreToken: nil), t0 + .milliseconds(5)),
            (.requested(path: nil), t0 + .milliseconds(6)),
            (.response(path: base + "t_3", code: 0, sessionHandle: nil, streams: [], restoreToken: nil), t0 + .milliseconds(9)),
            (.requested(path: base + "t_4"), t0 + .milliseconds(10)),
        ], expected: [
            .call(.createSession(handleToken: "t_1", sessionHandleToken: "t_2"), expect: base + "t_1"),
            .call(.selectSources(session: "/s", handleToken: "t_3", types: 1, cursorMode: 4, persistMode: 2, restoreToken: nil),
                  expect: base + "t_3"),
            .call(.start(session: "/s", handleToken: "t_4"), expect: base + "t_4"),
        ])
        #expect(v.isEmpty, "\(v)")
        // Granted: no deadline, and a timeout gives nothing.
        let done = SansIOContract.violations(make, inputs: [
            (.begin, t0), (.response(path: base + "t_1", code: 0, sessionHandle: "/s", streams: [], restoreToken: nil), t0),
            (.response(path: base + "t_3", code: 0, sessionHandle: nil, streams: [], restoreToken: nil), t0),
            (.response(path: base + "t_4", code: 0, sessionHandle: nil, streams: [PortalStream(node: 3)], restoreToken: "k"), t0),
            (.remoteOpened, t0),
        ], expectsDeadline: false)
        #expect(done.isEmpty, "\(done)")
    }
}
