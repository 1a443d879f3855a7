import CastCore
import Testing
@testable import CastCapture

struct ScreenCastPortalMachineTests {
    let base = "/org/freedesktop/portal/desktop/request/1_42/"

    func response(_ m: inout ScreenCastPortalMachine, _ path: String, code: UInt32 = 0, session: String? = nil,
                  streams: [PortalStream] = [], token: String? = nil) -> ScreenCastPortalMachine.Action? {
        m.handle(.response(path: path, code: code, sessionHandle: session, streams: streams, restoreToken: token))
    }

    @Test func theHappyPathInOrderWithTheRequestPathsPredicted() {
        var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 7, restoreToken: "old-token", tokenPrefix: "castd 9")
        #expect(m.begin() == .call(.createSession(handleToken: "castd_9_1", sessionHandleToken: "castd_9_2"),
                                   expect: base + "castd_9_1"))
        let session = "/org/freedesktop/portal/desktop/session/1_42/castd_9_2"
        #expect(response(&m, base + "castd_9_1", session: session)
                == .call(.selectSources(session: session, handleToken: "castd_9_3", types: 1, cursorMode: 4,
                                        persistMode: 2, restoreToken: "old-token"), expect: base + "castd_9_3"))
        #expect(response(&m, base + "castd_9_3") == .call(.start(session: session, handleToken: "castd_9_4"), expect: base + "castd_9_4"))
        let stream = PortalStream(node: 57, width: 1920, height: 1080, sourceType: 1)
        #expect(response(&m, base + "castd_9_4", streams: [stream], token: "new-token")
                == .call(.openPipeWireRemote(session: session), expect: nil))
        #expect(m.handle(.remoteOpened) == .finished(PortalGrant(sessionHandle: session, streams: [stream], restoreToken: "new-token",
                                                                 cursorMode: .metadata, offeredRestoreToken: true)))
        // Anything afterwards is ignored.
        #expect(m.handle(.timedOut) == nil)
    }

    /// Issue 31: `--source window` asks the dialog for a window (types 2), monitor for a monitor (1).
    @Test func selectSourcesAsksForTheSourceTypeGiven() {
        for (type, bits) in [(PortalSourceType.window, UInt32(2)), (.monitor, 1)] {
            var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 4, restoreToken: nil, tokenPrefix: "t",
                                            sourceTypes: type.rawValue)
            _ = m.begin()
            #expect(response(&m, base + "t_1", session: "/s")
                    == .call(.selectSources(session: "/s", handleToken: "t_3", types: bits, cursorMode: 4,
                                            persistMode: 2, restoreToken: nil), expect: base + "t_3"))
        }
    }

    /// xdg-desktop-portal-wlr 0.7 says source_type 2 (window) for the monitor it casts when only monitors were
    /// asked for (seen on the Sway rig): the grant says monitor and keeps what the portal said.
    @Test func aSourceTypeThatWasNotAskedForIsTakenAsTheOneAskedFor() {
        var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 2, restoreToken: nil, tokenPrefix: "t")
        _ = m.begin()
        _ = response(&m, base + "t_1", session: "/s")
        _ = response(&m, base + "t_3")
        _ = response(&m, base + "t_4", streams: [PortalStream(node: 7, width: 1280, height: 720, sourceType: 2, x: 0, y: 0)])
        guard case .finished(let g)? = m.handle(.remoteOpened) else { Issue.record("not finished"); return }
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
        _ = m.begin()
        guard case .call(.selectSources(_, _, _, let cursor, _, let token), _)? = response(&m, base + "t_1", session: "/s") else {
            Issue.record("expected SelectSources")
            return
        }
        #expect(token == nil)
        #expect(cursor == 2)
    }

    @Test func responsesOfOtherRequestsAreIgnored() {
        var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 4, restoreToken: nil, tokenPrefix: "t")
        _ = m.begin()
        #expect(response(&m, base + "someone_else", session: "/s") == nil)
        #expect(m.step == .creatingSession)
    }

    @Test func aReturnedHandleThatDiffersFromThePredictionIsFollowed() {
        var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 4, restoreToken: nil, tokenPrefix: "t")
        _ = m.begin()
        m.requestHandleReturned("/old/style/request/7")
        #expect(response(&m, base + "t_1", session: "/s") == nil)
        guard case .call(.selectSources, _)? = response(&m, "/old/style/request/7", session: "/s") else {
            Issue.record("expected SelectSources")
            return
        }
    }

    @Test func cancelInTheDialogClosesTheSessionAndSaysSo() {
        var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 4, restoreToken: nil, tokenPrefix: "t")
        _ = m.begin()
        _ = response(&m, base + "t_1", session: "/s")
        _ = response(&m, base + "t_3")
        guard case .closeAndFail(.closeSession(session: "/s"), let sentence)? = response(&m, base + "t_4", code: 1) else {
            Issue.record("expected close and fail")
            return
        }
        #expect(sentence == "ScreenCast portal: screen sharing was cancelled in the portal's dialog (Start).")
        #expect(m.handle(.remoteOpened) == nil)
    }

    @Test func aRefusedTokenIsDroppedAndThePortalAskedAgainOnce() {
        var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 4, restoreToken: "tok", tokenPrefix: "t")
        _ = m.begin()
        _ = response(&m, base + "t_1", session: "/s")
        _ = response(&m, base + "t_3")
        #expect(response(&m, base + "t_4", code: 2) == .call(.closeSession(session: "/s"), expect: nil))
        #expect(m.restoreToken == nil)
        #expect(m.handle(.sessionClosed) == .call(.createSession(handleToken: "t_5", sessionHandleToken: "t_6"), expect: base + "t_5"))
        guard case .call(.selectSources(_, _, _, _, _, let token), _)? = response(&m, base + "t_5", session: "/s2") else {
            Issue.record("expected SelectSources"); return
        }
        #expect(token == nil)
        _ = response(&m, base + "t_7")
        _ = response(&m, base + "t_8", streams: [PortalStream(node: 3)], token: "fresh")
        guard case .finished(let g)? = m.handle(.remoteOpened) else { Issue.record("expected a grant"); return }
        #expect(g.refusedRestoreToken && !g.offeredRestoreToken && g.restoreToken == "fresh" && g.sessionHandle == "/s2")
    }

    @Test func aSecondFailureAfterDroppingTheTokenFailsInWords() {
        var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 4, restoreToken: "tok", tokenPrefix: "t")
        _ = m.begin()
        _ = response(&m, base + "t_1", session: "/s")
        _ = response(&m, base + "t_3")
        _ = response(&m, base + "t_4", code: 2)
        _ = m.handle(.sessionClosed)
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
        _ = m.begin()
        #expect(m.handle(.callFailed("org.freedesktop.DBus.Error.ServiceUnknown: no portal"))
                == .failed("ScreenCast portal: the ScreenCast portal refused CreateSession: org.freedesktop.DBus.Error.ServiceUnknown: no portal."))
    }

    @Test func aTimeoutExplainsTheMissingHuman() {
        var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 4, restoreToken: nil, tokenPrefix: "t")
        _ = m.begin()
        _ = response(&m, base + "t_1", session: "/s")
        _ = response(&m, base + "t_3")
        guard case .closeAndFail(_, let sentence)? = m.handle(.timedOut) else { Issue.record("expected failure"); return }
        #expect(sentence.contains("did not answer Start in time"))
        #expect(sentence.contains("dialog"))
    }

    /// The shell's wait on a fake clock: a Start nobody answers (the dialog waits for a person)
    /// times out exactly at the deadline, and only then the machine says a person is needed.
    @Test func anUnansweredStartNeedsAUserAfterTheTimeoutAndNotBefore() {
        let clock = ManualClock(Instant(nanoseconds: 5_000_000_000))
        var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 4, restoreToken: "stale", tokenPrefix: "t")
        _ = m.begin()
        _ = response(&m, base + "t_1", session: "/s")
        _ = response(&m, base + "t_3")   // Start goes out now
        var wait = PortalResponseWait(timeout: .seconds(60))
        #expect(wait.remaining(now: clock.now()) == nil)   // not begun: nothing to wait for
        wait.began(now: clock.now())
        #expect(wait.remaining(now: clock.now()) == .seconds(60))
        clock.advance(by: .milliseconds(59_999))
        #expect(wait.remaining(now: clock.now()) == .milliseconds(1))
        #expect(!m.needsUser)
        clock.advance(by: .milliseconds(1))
        #expect(wait.remaining(now: clock.now()) == nil)
        guard case .closeAndFail(.closeSession(session: "/s"), let sentence)? = m.handle(.timedOut) else {
            Issue.record("expected the session closed and a failure"); return
        }
        #expect(m.needsUser)
        #expect(sentence.contains("nobody is there") && sentence.contains("did not accept the saved restore token"))
        #expect(!sentence.contains("stale"))   // the token itself never appears
        // A new call restarts the wait from its own send time.
        wait.began(now: clock.now())
        #expect(wait.remaining(now: clock.now() + .seconds(30)) == .seconds(30))
    }

    @Test func aTimeoutBeforeStartIsNotADialog() {
        var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 4, restoreToken: nil, tokenPrefix: "t")
        _ = m.begin()
        guard case .failed(let sentence)? = m.handle(.timedOut) else { Issue.record("expected failure"); return }
        #expect(!m.needsUser)
        #expect(sentence.contains("CreateSession"))
    }

    @Test func aStartWithoutStreamsFails() {
        var m = ScreenCastPortalMachine(sender: ":1.42", availableCursorModes: 4, restoreToken: nil, tokenPrefix: "t")
        _ = m.begin()
        _ = response(&m, base + "t_1", session: "/s")
        _ = response(&m, base + "t_3")
        guard case .closeAndFail(_, let sentence)? = response(&m, base + "t_4", streams: []) else { Issue.record("expected failure"); return }
        #expect(sentence.contains("no stream"))
    }
}
