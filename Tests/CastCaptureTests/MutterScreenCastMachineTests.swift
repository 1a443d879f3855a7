import CastCore
import SansIOContract
import Testing
@testable import CastCapture

struct MutterScreenCastMachineTests {
    let session = "/org/gnome/Mutter/ScreenCast/Session/u1"
    let stream = "/org/gnome/Mutter/ScreenCast/Stream/u1"

    /// Runs the machine up to the Start call.
    func started(_ m: inout MutterScreenCastMachine) {
        _ = m.step(.begin)
        _ = m.step(.returned(path: session))
        _ = m.step(.returned(path: stream))
    }

    @Test func theHappyPathSubscribesBeforeStartAndFinishesWithTheNode() {
        var m = MutterScreenCastMachine(connector: "Meta-0", cursorMode: .metadata)
        #expect(m.step(.begin) == .call(.createSession, subscribe: []))
        #expect(m.step(.returned(path: session))
                == .call(.recordMonitor(session: session, connector: "Meta-0", cursorMode: .metadata), subscribe: []))
        #expect(m.step(.returned(path: stream))
                == .call(.start(session: session), subscribe: [.pipeWireStreamAdded(stream: stream), .closed(session: session)]))
        #expect(m.step(.started) == nil)
        #expect(m.step(.streamAdded(stream: stream, node: 47))
                == .finished(MutterGrant(session: session, stream: stream, node: 47, cursorMode: .metadata)))
        #expect(m.step == .running)
    }

    @Test func theNodeSignalMayArriveBeforeStartsReply() {
        var m = MutterScreenCastMachine()
        started(&m)
        #expect(m.step(.streamAdded(stream: stream, node: 9)) == nil)
        #expect(m.step(.started) == .finished(MutterGrant(session: session, stream: stream, node: 9, cursorMode: .metadata)))
    }

    @Test func anotherStreamsSignalIsIgnored() {
        var m = MutterScreenCastMachine()
        started(&m)
        #expect(m.step(.started) == nil)
        #expect(m.step(.streamAdded(stream: "/org/gnome/Mutter/ScreenCast/Stream/u9", node: 3)) == nil)
        #expect(m.step == .starting)
    }

    @Test func aRefusedCreateSessionFailsWithoutStop() {
        var m = MutterScreenCastMachine()
        _ = m.step(.begin)
        guard case .failed(let s)? = m.step(.callFailed("org.freedesktop.DBus.Error.ServiceUnknown: no such name")) else {
            Issue.record("expected a failure")
            return
        }
        #expect(s.contains("CreateSession") && s.contains("ServiceUnknown"))
        #expect(m.step(.stop) == nil)
    }

    @Test func aRefusedRecordMonitorStopsTheSessionAndNamesTheConnector() {
        var m = MutterScreenCastMachine(connector: "HDMI-9")
        _ = m.step(.begin)
        _ = m.step(.returned(path: session))
        guard case .stopAndFail(let call, let s)? = m.step(.callFailed("org.freedesktop.DBus.Error.Failed: Unknown monitor")) else {
            Issue.record("expected stop-and-fail")
            return
        }
        #expect(call == .stop(session: session))
        #expect(s.contains("HDMI-9") && s.contains("Unknown monitor"))
        // Already stopped by the failure: no second Stop at teardown.
        #expect(m.step(.stop) == nil)
    }

    @Test func noNodeInTimeStopsTheSession() {
        var m = MutterScreenCastMachine()
        started(&m)
        _ = m.step(.started)
        guard case .stopAndFail(.stop(let s), let sentence)? = m.timeout() else {
            Issue.record("expected stop-and-fail")
            return
        }
        #expect(s == session)
        #expect(sentence.contains("no PipeWire stream"))
    }

    @Test func closedDuringTheRunningCastEndsItWithASentenceAndNoStop() {
        var m = MutterScreenCastMachine()
        started(&m)
        _ = m.step(.started)
        _ = m.step(.streamAdded(stream: stream, node: 5))
        #expect(m.step(.sessionClosed(session: "/other/session")) == nil)
        guard case .ended(let s)? = m.step(.sessionClosed(session: session)) else {
            Issue.record("expected the cast to end")
            return
        }
        #expect(s.contains("closed the screen-cast session"))
        #expect(m.step(.stop) == nil)
    }

    @Test func closedBeforeTheNodeFails() {
        var m = MutterScreenCastMachine()
        started(&m)
        guard case .stopAndFail(_, let s)? = m.step(.sessionClosed(session: session)) else {
            Issue.record("expected a failure")
            return
        }
        #expect(s.contains("closed the session during Start"))
    }

    @Test func teardownOfARunningCastStopsItOnce() {
        var m = MutterScreenCastMachine()
        started(&m)
        _ = m.step(.started)
        _ = m.step(.streamAdded(stream: stream, node: 5))
        #expect(m.step(.stop) == .call(.stop(session: session), subscribe: []))
        #expect(m.step(.stop) == nil)
        #expect(m.step(.sessionClosed(session: session)) == nil)
    }

    @Test func eventsBeforeBeginAreIgnored() {
        var m = MutterScreenCastMachine()
        #expect(m.step(.returned(path: session)) == nil)
        #expect(m.step(.stop) == nil)
    }
}

/// The Mutter machine keeps the one sans-IO contract (`SansIO` in CastCore); its one deadline is
/// the setup's wait for the node, from `.begin`.
@Suite struct MutterScreenCastMachineContractTests {
    let session = "/org/gnome/Mutter/ScreenCast/Session/u1"
    let stream = "/org/gnome/Mutter/ScreenCast/Stream/u1"
    let t0 = Instant(nanoseconds: 2_000_000_000)

    @Test func theSharedContractHolds() {
        // Started, no node yet: the wait is the deadline, and at it the session is stopped.
        let v = SansIOContract.violations({ MutterScreenCastMachine(connector: "Meta-0", nodeTimeout: .seconds(10)) }, inputs: [
            (.begin, t0), (.returned(path: session), t0 + .milliseconds(3)), (.returned(path: stream), t0 + .milliseconds(6)),
            (.started, t0 + .milliseconds(9)),
        ], expected: [
            .call(.createSession, subscribe: []),
            .call(.recordMonitor(session: session, connector: "Meta-0", cursorMode: .metadata), subscribe: []),
            .call(.start(session: session), subscribe: [.pipeWireStreamAdded(stream: stream), .closed(session: session)]),
        ])
        #expect(v.isEmpty, "\(v)")
        // Running: no deadline; a timeout gives nothing; Closed ends it, the teardown stops nothing more.
        let running = SansIOContract.violations({ MutterScreenCastMachine() }, inputs: [
            (.begin, t0), (.returned(path: session), t0), (.returned(path: stream), t0), (.started, t0),
            (.streamAdded(stream: stream, node: 5), t0), (.stop, t0 + .seconds(1)), (.stop, t0 + .seconds(2)),
        ], expectsDeadline: false)
        #expect(running.isEmpty, "\(running)")
    }

    @Test func theNodesWaitRunsFromBeginAndEndsExactlyAtItsDeadline() {
        var m = MutterScreenCastMachine(nodeTimeout: .seconds(10))
        #expect(m.nextDeadline() == nil)
        _ = m.step(.begin, now: t0)
        _ = m.step(.returned(path: session), now: t0 + .seconds(1))
        _ = m.step(.returned(path: stream), now: t0 + .seconds(2))
        #expect(m.step(.started, now: t0 + .seconds(3)) == nil)
        #expect(m.nextDeadline() == t0 + .seconds(10))
        m.handleTimeout(now: t0 + .seconds(10) - .milliseconds(1))
        #expect(m.poll() == nil)
        m.handleTimeout(now: t0 + .seconds(10))
        guard case .stopAndFail(.stop(session), _)? = m.poll() else { Issue.record("expected stop-and-fail"); return }
        #expect(m.nextDeadline() == nil)
    }
}
