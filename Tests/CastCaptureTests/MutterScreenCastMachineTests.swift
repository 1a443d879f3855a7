import Testing
@testable import CastCapture

struct MutterScreenCastMachineTests {
    let session = "/org/gnome/Mutter/ScreenCast/Session/u1"
    let stream = "/org/gnome/Mutter/ScreenCast/Stream/u1"

    /// Runs the machine up to the Start call.
    func started(_ m: inout MutterScreenCastMachine) {
        _ = m.begin()
        _ = m.handle(.returned(path: session))
        _ = m.handle(.returned(path: stream))
    }

    @Test func theHappyPathSubscribesBeforeStartAndFinishesWithTheNode() {
        var m = MutterScreenCastMachine(connector: "Meta-0", cursorMode: .metadata)
        #expect(m.begin() == .call(.createSession, subscribe: []))
        #expect(m.handle(.returned(path: session))
                == .call(.recordMonitor(session: session, connector: "Meta-0", cursorMode: .metadata), subscribe: []))
        #expect(m.handle(.returned(path: stream))
                == .call(.start(session: session), subscribe: [.pipeWireStreamAdded(stream: stream), .closed(session: session)]))
        #expect(m.handle(.started) == .wait)
        #expect(m.handle(.streamAdded(stream: stream, node: 47))
                == .finished(MutterGrant(session: session, stream: stream, node: 47, cursorMode: .metadata)))
        #expect(m.step == .running)
    }

    @Test func theNodeSignalMayArriveBeforeStartsReply() {
        var m = MutterScreenCastMachine()
        started(&m)
        #expect(m.handle(.streamAdded(stream: stream, node: 9)) == .wait)
        #expect(m.handle(.started) == .finished(MutterGrant(session: session, stream: stream, node: 9, cursorMode: .metadata)))
    }

    @Test func anotherStreamsSignalIsIgnored() {
        var m = MutterScreenCastMachine()
        started(&m)
        #expect(m.handle(.started) == .wait)
        #expect(m.handle(.streamAdded(stream: "/org/gnome/Mutter/ScreenCast/Stream/u9", node: 3)) == nil)
        #expect(m.step == .starting)
    }

    @Test func aRefusedCreateSessionFailsWithoutStop() {
        var m = MutterScreenCastMachine()
        _ = m.begin()
        guard case .failed(let s)? = m.handle(.callFailed("org.freedesktop.DBus.Error.ServiceUnknown: no such name")) else {
            Issue.record("expected a failure")
            return
        }
        #expect(s.contains("CreateSession") && s.contains("ServiceUnknown"))
        #expect(m.stop() == nil)
    }

    @Test func aRefusedRecordMonitorStopsTheSessionAndNamesTheConnector() {
        var m = MutterScreenCastMachine(connector: "HDMI-9")
        _ = m.begin()
        _ = m.handle(.returned(path: session))
        guard case .stopAndFail(let call, let s)? = m.handle(.callFailed("org.freedesktop.DBus.Error.Failed: Unknown monitor")) else {
            Issue.record("expected stop-and-fail")
            return
        }
        #expect(call == .stop(session: session))
        #expect(s.contains("HDMI-9") && s.contains("Unknown monitor"))
        // Already stopped by the failure: no second Stop at teardown.
        #expect(m.stop() == nil)
    }

    @Test func noNodeInTimeStopsTheSession() {
        var m = MutterScreenCastMachine()
        started(&m)
        _ = m.handle(.started)
        guard case .stopAndFail(.stop(let s), let sentence)? = m.handle(.timedOut) else {
            Issue.record("expected stop-and-fail")
            return
        }
        #expect(s == session)
        #expect(sentence.contains("no PipeWire stream"))
    }

    @Test func closedDuringTheRunningCastEndsItWithASentenceAndNoStop() {
        var m = MutterScreenCastMachine()
        started(&m)
        _ = m.handle(.started)
        _ = m.handle(.streamAdded(stream: stream, node: 5))
        #expect(m.handle(.sessionClosed(session: "/other/session")) == nil)
        guard case .ended(let s)? = m.handle(.sessionClosed(session: session)) else {
            Issue.record("expected the cast to end")
            return
        }
        #expect(s.contains("closed the screen-cast session"))
        #expect(m.stop() == nil)
    }

    @Test func closedBeforeTheNodeFails() {
        var m = MutterScreenCastMachine()
        started(&m)
        guard case .stopAndFail(_, let s)? = m.handle(.sessionClosed(session: session)) else {
            Issue.record("expected a failure")
            return
        }
        #expect(s.contains("closed the session during Start"))
    }

    @Test func teardownOfARunningCastStopsItOnce() {
        var m = MutterScreenCastMachine()
        started(&m)
        _ = m.handle(.started)
        _ = m.handle(.streamAdded(stream: stream, node: 5))
        #expect(m.stop() == .stop(session: session))
        #expect(m.stop() == nil)
        #expect(m.handle(.sessionClosed(session: session)) == nil)
    }

    @Test func eventsBeforeBeginAreIgnored() {
        var m = MutterScreenCastMachine()
        #expect(m.handle(.returned(path: session)) == nil)
        #expect(m.stop() == nil)
    }
}
