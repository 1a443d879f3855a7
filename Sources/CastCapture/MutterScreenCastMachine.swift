import CastCore

/// Mutter's cursor modes (the `cursor-mode` property of RecordMonitor).
public enum MutterCursorMode: UInt32, Sendable {
    case hidden = 0
    case embedded = 1
    /// The cursor as `SPA_META_Cursor`; castd draws it.
    case metadata = 2
}

/// A call the shell makes on org.gnome.Mutter.ScreenCast (and its Session objects).
public enum MutterCall: Equatable, Sendable {
    /// org.gnome.Mutter.ScreenCast.CreateSession({}) → the session's object path.
    case createSession
    /// Session.RecordMonitor(connector, {cursor-mode}) → the stream's object path.
    case recordMonitor(session: String, connector: String, cursorMode: MutterCursorMode)
    /// Session.Start(); the stream then announces its node with PipeWireStreamAdded.
    case start(session: String)
    /// Session.Stop() (teardown, or after a failure once a session exists).
    case stop(session: String)
}

/// A signal the shell must be subscribed to before the call that makes it.
public enum MutterSignal: Equatable, Sendable {
    /// org.gnome.Mutter.ScreenCast.Stream.PipeWireStreamAdded(u node_id) on this stream.
    case pipeWireStreamAdded(stream: String)
    /// org.gnome.Mutter.ScreenCast.Session.Closed() on this session.
    case closed(session: String)
}

/// A started Mutter cast: the node lives on the session's default PipeWire daemon.
public struct MutterGrant: Equatable, Sendable {
    public var session: String
    public var stream: String
    public var node: UInt32
    public var cursorMode: MutterCursorMode
}

/// The call sequencing of org.gnome.Mutter.ScreenCast, GNOME's own
/// screen-cast interface (no dialog): CreateSession → RecordMonitor →
/// (subscribe to the stream's PipeWireStreamAdded and the session's Closed)
/// → Start → the node id arrives as a signal. Then the running cast: the
/// session's Closed ends it; `stop()` is the teardown. Pure: the shell
/// makes the D-Bus calls and feeds back what came of them.
public struct MutterScreenCastMachine: Sendable {
    public enum Event: Equatable, Sendable {
        /// The object path CreateSession or RecordMonitor returned.
        case returned(path: String)
        /// Start returned without error.
        case started
        case streamAdded(stream: String, node: UInt32)
        case sessionClosed(session: String)
        /// A D-Bus error reply to the current call (name and text).
        case callFailed(String)
        /// No node within the shell's wait.
        case timedOut
    }

    public enum Action: Equatable, Sendable {
        /// Subscribe to `subscribe` first, then make the call.
        case call(MutterCall, subscribe: [MutterSignal])
        /// Nothing to call: wait for a signal (or time out).
        case wait
        /// Stop the session (best effort), then report the sentence.
        case stopAndFail(MutterCall, failure: String)
        case finished(MutterGrant)
        case failed(String)
        /// The running cast ended (Mutter closed the session); the sentence says why.
        case ended(String)
    }

    enum Step: Equatable, Sendable {
        case idle, creatingSession, recording, starting, running, stopped, failed
    }

    public let connector: String
    public let cursorMode: MutterCursorMode
    private(set) var step: Step = .idle
    private var session: String? = nil
    private var stream: String? = nil
    private var startReturned = false
    private var node: UInt32? = nil

    /// `connector` "" records the primary monitor.
    public init(connector: String = "", cursorMode: MutterCursorMode = .metadata) {
        self.connector = connector
        self.cursorMode = cursorMode
    }

    public mutating func begin() -> Action {
        precondition(step == .idle, "begin() once")
        step = .creatingSession
        return .call(.createSession, subscribe: [])
    }

    public mutating func handle(_ event: Event) -> Action? {
        switch (step, event) {
        case (.idle, _), (.stopped, _), (.failed, _):
            return nil
        case (.running, .sessionClosed(let path)):
            guard path == session else { return nil }
            step = .stopped
            return .ended("Mutter ScreenCast: GNOME closed the screen-cast session \(path) (the monitor went away, the session ended or another client stopped it).")
        case (.running, _):
            return nil
        case (_, .callFailed(let message)):
            return fail("Mutter refused \(stepName): \(message)")
        case (_, .timedOut):
            return fail("Mutter announced no PipeWire stream within the wait after Start")
        case (_, .sessionClosed(let path)):
            guard path == session else { return nil }
            return fail("Mutter closed the session during \(stepName)")
        case (.creatingSession, .returned(let path)):
            guard !path.isEmpty else { return fail("Mutter created a session without an object path") }
            session = path
            step = .recording
            return .call(.recordMonitor(session: path, connector: connector, cursorMode: cursorMode), subscribe: [])
        case (.recording, .returned(let path)):
            guard !path.isEmpty else { return fail("Mutter's RecordMonitor returned no stream") }
            stream = path
            step = .starting
            return .call(.start(session: session!),
                         subscribe: [.pipeWireStreamAdded(stream: path), .closed(session: session!)])
        case (.starting, .started):
            startReturned = true
            return finishIfReady() ?? .wait
        case (.starting, .streamAdded(let path, let id)):
            // The signal may be processed before Start's reply: both are needed.
            guard path == stream else { return nil }
            node = id
            return finishIfReady() ?? .wait
        case (_, .returned), (_, .started), (_, .streamAdded):
            return nil
        }
    }

    /// Teardown: the call to make (Stop) when a session exists and is not already over.
    public mutating func stop() -> MutterCall? {
        defer { if step != .failed { step = .stopped } }
        guard let session, step != .stopped, step != .failed else { return nil }
        return .stop(session: session)
    }

    private mutating func finishIfReady() -> Action? {
        guard startReturned, let node, let session, let stream else { return nil }
        step = .running
        return .finished(MutterGrant(session: session, stream: stream, node: node, cursorMode: cursorMode))
    }

    private var stepName: String {
        switch step {
        case .idle: return "nothing"
        case .creatingSession: return "CreateSession"
        case .recording: return "RecordMonitor(\(connector.isEmpty ? "primary monitor" : connector))"
        case .starting: return "Start"
        case .running: return "the running cast"
        case .stopped: return "nothing (stopped)"
        case .failed: return "nothing (failed)"
        }
    }

    private mutating func fail(_ message: String) -> Action {
        let sentence = "Mutter ScreenCast: " + message + "."
        step = .failed
        if let session { return .stopAndFail(.stop(session: session), failure: sentence) }
        return .failed(sentence)
    }
}
