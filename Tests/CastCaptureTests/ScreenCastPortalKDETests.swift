import CastCore
import Testing
@testable import CastCapture

/// The ScreenCast exchange as the REAL xdg-desktop-portal 1.16 with xdg-desktop-portal-kde 5.27.5 answered it on a
/// headless KWin 5.27.5 (`kwin_wayland --virtual`, 1280x720; docs/wayland.md, "KDE Plasma"), replayed into castd's
/// portal machine. Recorded from the Response signals (busctl-style):
///   properties: AvailableSourceTypes 3, AvailableCursorModes 7, version 4
///   CreateSession → (0, {session_handle: <'/org/freedesktop/portal/desktop/session/1_17/s1'>})
///   SelectSources → (0, {})
///   Start, restore data granted → (0, {streams: [(36, {size: (1280, 720), source_type: 1})], restore_token: <the offered one>})
///   Start, a window's restore data granted (types 2) → (0, {streams: [(36, {source_type: 2})], restore_token: ...}): no size
///   Start, the QML dialog cannot load (a QML module missing) → (1, {}) at once, no dialog ever shown
///   Start, the dialog shown and nobody there → no Response at all
struct ScreenCastPortalKDETests {
    let base = "/org/freedesktop/portal/desktop/request/1_17/"
    let session = "/org/freedesktop/portal/desktop/session/1_17/t_2"

    func started(restoreToken: String?) -> ScreenCastPortalMachine {
        var m = ScreenCastPortalMachine(sender: ":1.17", availableCursorModes: 7, restoreToken: restoreToken, tokenPrefix: "t")
        #expect(m.step(.begin) == .call(.createSession(handleToken: "t_1", sessionHandleToken: "t_2"), expect: base + "t_1"))
        #expect(m.step(.response(path: base + "t_1", code: 0, sessionHandle: session, streams: [], restoreToken: nil))
                == .call(.selectSources(session: session, handleToken: "t_3", types: 1, cursorMode: 4, persistMode: 2,
                                        restoreToken: restoreToken), expect: base + "t_3"))
        #expect(m.step(.response(path: base + "t_3", code: 0, sessionHandle: nil, streams: [], restoreToken: nil))
                == .call(.start(session: session, handleToken: "t_4"), expect: base + "t_4"))
        return m
    }

    /// KDE's answer to a restored grant: one monitor stream with size and source type but no position or id, and the
    /// SAME restore token handed back (xdg-desktop-portal 1.16 keeps the token of a restored grant).
    @Test func aRestoredKDEGrantStartsWithTheSameTokenKept() {
        let token = "11111111-2222-4333-8444-555555555555"
        var m = started(restoreToken: token)
        let stream = PortalStream(node: 36, width: 1280, height: 720, sourceType: 1)
        #expect(m.step(.response(path: base + "t_4", code: 0, sessionHandle: nil, streams: [stream], restoreToken: token))
                == .call(.openPipeWireRemote(session: session), expect: nil))
        #expect(m.step(.remoteOpened) == .finished(PortalGrant(sessionHandle: session, streams: [stream], restoreToken: token,
                                                                 cursorMode: .metadata, offeredRestoreToken: true)))
        #expect(PortalSourceType.name(stream.sourceType) == "monitor")
    }

    /// A restored KDE window grant: the stream carries its source type only, no size (castd learns the size from the
    /// PipeWire format), and the grant still finishes.
    @Test func aRestoredKDEWindowGrantHasNoSizeAndStillFinishes() {
        let token = "31111111-2222-4333-8444-555555555555"
        var m = ScreenCastPortalMachine(sender: ":1.17", availableCursorModes: 7, restoreToken: token, tokenPrefix: "t",
                                        sourceTypes: PortalSourceType.window.rawValue)
        _ = m.step(.begin)
        _ = m.step(.response(path: base + "t_1", code: 0, sessionHandle: session, streams: [], restoreToken: nil))
        _ = m.step(.response(path: base + "t_3", code: 0, sessionHandle: nil, streams: [], restoreToken: nil))
        let stream = PortalStream(node: 36, sourceType: 2)
        #expect(m.step(.response(path: base + "t_4", code: 0, sessionHandle: nil, streams: [stream], restoreToken: token))
                == .call(.openPipeWireRemote(session: session), expect: nil))
        guard case .finished(let grant)? = m.step(.remoteOpened) else { Issue.record("expected a grant"); return }
        #expect(grant.streams == [stream] && grant.streams[0].width == nil && grant.restoreToken == token)
        #expect(PortalSourceType.name(grant.streams[0].sourceType) == "window")
    }

    /// KDE's portal answers 1 ("cancelled") when its dialog fails to load, e.g. without plasma-workspace's QML
    /// modules: castd closes the session and says it was cancelled, it does not wait for a dialog nobody sees.
    @Test func aDialogThatCannotLoadIsACancelAndClosesTheSession() {
        var m = started(restoreToken: nil)
        guard case .closeAndFail(.closeSession(session: session), let sentence)?
                = m.step(.response(path: base + "t_4", code: 1, sessionHandle: nil, streams: [], restoreToken: nil)) else {
            Issue.record("expected the session closed and a failure"); return
        }
        #expect(sentence.contains("cancelled"))
        #expect(!m.needsUser)
    }

    /// The dialog shown on a headless KWin and nobody to press Share: no Response; castd's wait ends it.
    @Test func anUnansweredKDEDialogNeedsAUser() {
        var m = started(restoreToken: nil)
        guard case .closeAndFail(.closeSession(session: session), let sentence)? = m.timeout() else {
            Issue.record("expected the session closed and a failure"); return
        }
        #expect(m.needsUser && sentence.contains("dialog"))
    }
}
