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
/// session's Closed ends it; `.stop` is the teardown. Pure, under the one sans-IO contract
/// (`SansIO` in CastCore): the shell feeds `.begin` and then what came of each call with
/// `handle(_:now:)`, makes the call `poll()` answers, and while nothing is to be called waits
/// for a signal until `nextDeadline()` (the node's wait, from `.begin`), where
/// `handleTimeout(now:)` gives up.
public struct MutterScreenCastMachine: Sendable, SansIO {
    public enum Input: Equatable, Sendable {
        /// Start: CreateSession is the first call, and the wait for the node begins.
        case begin
        /// Teardown: Stop the session when one exists and is not already over.
        case stop
        /// The object path CreateSession or RecordMonitor returned.
        case returned(path: String)
        /// Start returned without error.
        case started
        case streamAdded(stream: String, node: UInt32)
        case sessionClosed(session: String)
        /// A D-Bus error reply to the current call (name and text).
        case callFailed(String)
    }

    public typealias Output = Action

    /// What to do; no action after an input means: wait for a signal, until `nextDeadline()`.
    public enum Action: Equatable, Sendable {
        /// Subscribe to `subscribe` first, then make the call.
        case call(MutterCall, subscribe: [MutterSignal])
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
    /// How long the whole setup may take, CreateSession to the node.
    public let nodeTimeout: Duration
    /// The end of that wait; nil once the cast runs or is over.
    private var nodeDeadline: Instant? = nil
    private var outputs = OutputQueue<Action>()

    /// `connector` "" records the primary monitor.
    public init(connector: String = "", cursorMode: MutterCursorMode = .metadata, nodeTimeout: Duration = .seconds(10)) {
        self.connector = connector
        self.cursorMode = cursorMode
        self.nodeTimeout = nodeTimeout
    }

    public mutating func handle(_ input: Input, now: Instant) {
        if case .begin = input, step == .idle { nodeDeadline = now + nodeTimeout }
        if let action = decide(input) { outputs.push(action) }
        if step != .creatingSession && step != .recording && step != .starting { nodeDeadline = nil }
    }

    public mutating func poll() -> Action? { outputs.pop() }

    public func nextDeadline() -> Instant? { nodeDeadline }

    /// The setup's wait is over with no node.
    public mutating func handleTimeout(now: Instant) {
        guard let due = nodeDeadline, now >= due else { return }
        nodeDeadline = nil
        outputs.push(fail("Mutter announced no PipeWire stream within the wait after Start"))
    }

    private mutating func decide(_ input: Input) -> Action? {
        switch (step, input) {
        case (.idle, .begin):
            step = .creatingSession
            return .call(.createSession, subscribe: [])
        case (_, .stop):
            return stop()
        case (.idle, _), (.stopped, _), (.failed, _), (_, .begin):
            return nil
        case (.running, .sessionClosed(let path)):
            guard path == session else { return nil }
            step = .stopped
            return .ended("Mutter ScreenCast: GNOME closed the screen-cast session \(path) (the monitor went away, the session ended or another client stopped it).")
        case (.running, _):
            return nil
        case (_, .callFailed(let message)):
            return fail("Mutter refused \(stepName): \(message)")
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
            return finishIfReady()
        case (.starting, .streamAdded(let path, let id)):
            // The signal may be processed before Start's reply: both are needed.
            guard path == stream else { return nil }
            node = id
            return finishIfReady()
        case (_, .returned), (_, .started), (_, .streamAdded):
            return nil
        }
    }

    /// Teardown: the call to make (Stop) when a session exists and is not already over.
    private mutating func stop() -> Action? {
        defer { if step != .failed { step = .stopped } }
        guard let session, step != .stopped, step != .failed else { return nil }
        return .call(.stop(session: session), subscribe: [])
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
