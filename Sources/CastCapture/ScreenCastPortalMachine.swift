import CastCore

/// One stream the portal's Start handed out: a PipeWire node and what it shows.
public struct PortalStream: Equatable, Sendable {
    public var node: UInt32
    /// The `size` property (logical pixels), when the portal gave one.
    public var width: Int?
    public var height: Int?
    /// 1 monitor, 2 window, 4 virtual (the `source_type` property).
    public var sourceType: UInt32?
    /// The `position` property (a monitor's place in the compositor's space), when given.
    public var x: Int?
    public var y: Int?
    /// The `id` property (opaque, stable across a restored session; portal version 4).
    public var id: String?
    /// The `mapping_id` property (names the stream for other portals; portal version 5).
    public var mappingId: String?
    /// The `source_type` the portal said when it was not what castd asked for (then `sourceType` is
    /// what was asked for; see `ScreenCastPortalMachine.asAskedFor`); nil otherwise.
    public var reportedSourceType: UInt32? = nil

    public init(node: UInt32, width: Int? = nil, height: Int? = nil, sourceType: UInt32? = nil,
                x: Int? = nil, y: Int? = nil, id: String? = nil, mappingId: String? = nil) {
        self.node = node
        self.width = width
        self.height = height
        self.sourceType = sourceType
        self.x = x
        self.y = y
        self.id = id
        self.mappingId = mappingId
    }

    /// "1920x1080 at 0,0", "1280x720", "" (what the portal said of its size and place).
    public var geometry: String {
        var parts: [String] = []
        if let width, let height { parts.append("\(width)x\(height)") }
        if let x, let y { parts.append("at \(x),\(y)") }
        return parts.joined(separator: " ")
    }

    /// "monitor 1920x1080 at 0,0" (what `castd status` and the log say is shared).
    public var described: String {
        let kind = PortalSourceType.name(sourceType) ?? "source"
        return geometry.isEmpty ? kind : "\(kind) \(geometry)"
    }
}

/// The ScreenCast portal's source types (SelectSources' `types` bits, a stream's `source_type`).
public enum PortalSourceType: UInt32, Sendable, CaseIterable {
    case monitor = 1
    case window = 2
    case virtual = 4

    /// "monitor", "window", "virtual"; nil for a value the portal spec does not define.
    public static func name(_ raw: UInt32?) -> String? {
        raw.flatMap { PortalSourceType(rawValue: $0) }.map { "\($0)" }
    }
}

/// The ScreenCast portal's cursor modes (the `AvailableCursorModes` bits).
public enum PortalCursorMode: UInt32, Sendable {
    case hidden = 1
    case embedded = 2
    case metadata = 4

    /// Metadata when the portal offers it (castd draws the cursor), else embedded, else hidden.
    public static func choose(available: UInt32) -> PortalCursorMode {
        if available & metadata.rawValue != 0 { return .metadata }
        if available & embedded.rawValue != 0 { return .embedded }
        return .hidden
    }
}

/// What the portal session produced.
public struct PortalGrant: Equatable, Sendable {
    public var sessionHandle: String
    public var streams: [PortalStream]
    /// The single-use token for the next start (nil when the portal gave none).
    public var restoreToken: String?
    public var cursorMode: PortalCursorMode
    /// Whether a saved token was offered to SelectSources (in the session that started).
    public var offeredRestoreToken: Bool
    /// A saved token was refused (Start failed with it) and the portal was asked again without one.
    public var refusedRestoreToken: Bool = false
}

/// A call the shell must make. Those with a `requestPath` answer through the
/// `Response` signal of that Request object: the shell subscribes to it
/// before calling (the reply could otherwise come first and be lost).
public enum PortalCall: Equatable, Sendable {
    case createSession(handleToken: String, sessionHandleToken: String)
    case selectSources(session: String, handleToken: String, types: UInt32, cursorMode: UInt32,
                       persistMode: UInt32, restoreToken: String?)
    case start(session: String, handleToken: String)
    case openPipeWireRemote(session: String)
    /// org.freedesktop.portal.Session.Close (after a failure once a session exists).
    case closeSession(session: String)
}

/// The request/response sequencing of org.freedesktop.portal.ScreenCast:
/// CreateSession → SelectSources (monitor, cursor mode, persist_mode 2, the
/// saved restore token) → Start → OpenPipeWireRemote. Pure, under the one sans-IO contract
/// (`SansIO` in CastCore): the shell feeds `.begin` and then what came of each call with
/// `handle(_:now:)`, makes the call `poll()` answers, and while a Response is awaited arms one
/// timer for `nextDeadline()` (the end of the wait), where `handleTimeout(now:)` gives up.
public struct ScreenCastPortalMachine: Sendable, SansIO {
    public enum Input: Equatable, Sendable {
        /// Start: CreateSession is the first call.
        case begin
        /// A call answered by a Response returned, with the Request object's path when the reply
        /// carried one (portals before 0.9 return a different path than the predicted one: the
        /// Response is expected there instead). The wait for the Response starts afresh now.
        case requested(path: String?)
        /// A Request's Response signal: `code` 0 success, 1 cancelled by the user, 2 other;
        /// the results of interest already parsed out.
        case response(path: String, code: UInt32, sessionHandle: String?, streams: [PortalStream], restoreToken: String?)
        /// OpenPipeWireRemote's reply (the shell keeps the fd).
        case remoteOpened
        /// A D-Bus error reply to the current call (its message, already a sentence or a D-Bus error name and text).
        case callFailed(String)
        /// The session the machine asked to close (before trying again without the token) is closed.
        case sessionClosed
    }

    public typealias Output = Action

    public enum Action: Equatable, Sendable {
        /// Make this call; when `expect` is set, subscribe to that Request path's Response first.
        case call(PortalCall, expect: String?)
        /// Close the session (best effort), then report `failure`.
        case closeAndFail(PortalCall, failure: String)
        case finished(PortalGrant)
        case failed(String)
    }

    enum Step: Equatable, Sendable {
        case idle, creatingSession, selectingSources, starting, openingRemote, closingForRetry, done, failed
    }

    /// A stream as the type asked for when castd asked for exactly one type and the portal said
    /// another: the portal can only grant what SelectSources allowed, so its word is the error.
    /// xdg-desktop-portal-wlr 0.7 says 2 (window) for every monitor it casts (its `1 << MONITOR`),
    /// which would make castd tell the person a window is shared. The portal's value is kept.
    static func asAskedFor(_ stream: PortalStream, types: UInt32) -> PortalStream {
        guard let said = stream.sourceType, said != types, types.nonzeroBitCount == 1 else { return stream }
        var s = stream
        s.reportedSourceType = said
        s.sourceType = types
        return s
    }

    /// The unique bus name, e.g. ":1.42" (Request paths are made of it).
    public let sender: String
    public let cursorMode: PortalCursorMode
    /// SelectSources' `types`: 1 monitor, 2 window (issue 31: `--source`), 3 either.
    public let sourceTypes: UInt32
    public private(set) var restoreToken: String?
    private var refusedToken = false
    /// Set when Start went unanswered for the whole wait: the portal is showing its
    /// dialog and nobody accepts it (a daemon with no person at the screen).
    public private(set) var needsUser = false
    private(set) var step: Step = .idle
    private var tokenCounter = 0
    private let tokenPrefix: String
    private var expected: String? = nil
    private var session: String? = nil
    private var grant: (streams: [PortalStream], token: String?)? = nil
    /// How long a Response may take (a portal waiting for a person nobody is there to be).
    public let responseTimeout: Duration
    /// The end of the wait for the expected Response; nil when none is awaited.
    private var responseDeadline: Instant? = nil
    private var outputs = OutputQueue<Action>()

    /// `tokenPrefix` makes handle tokens unique per castd process (e.g. "castd_<pid>").
    public init(sender: String, availableCursorModes: UInt32, restoreToken: String?, tokenPrefix: String,
                sourceTypes: UInt32 = PortalSourceType.monitor.rawValue, responseTimeout: Duration = .seconds(60)) {
        self.sender = sender
        self.responseTimeout = responseTimeout
        self.sourceTypes = sourceTypes
        cursorMode = PortalCursorMode.choose(available: availableCursorModes)
        self.restoreToken = restoreToken.flatMap { $0.isEmpty ? nil : $0 }
        self.tokenPrefix = tokenPrefix.map { $0.isLetter || $0.isNumber ? $0 : "_" }.reduce(into: "") { $0.append($1) }
    }

    /// The sender part of portal object paths: ":1.42" → "1_42".
    public var senderPathComponent: String {
        String(sender.drop { $0 == ":" }.map { $0 == "." ? "_" : $0 })
    }

    public func requestPath(token: String) -> String {
        "/org/freedesktop/portal/desktop/request/\(senderPathComponent)/\(token)"
    }

    private mutating func nextToken() -> String {
        tokenCounter += 1
        return "\(tokenPrefix)_\(tokenCounter)"
    }

    private mutating func createSession() -> Action {
        step = .creatingSession
        let t = nextToken()
        expected = requestPath(token: t)
        return .call(.createSession(handleToken: t, sessionHandleToken: nextToken()), expect: expected)
    }

    private var awaitsResponse: Bool { step == .creatingSession || step == .selectingSources || step == .starting }

    public mutating func handle(_ input: Input, now: Instant) {
        let wasAwaiting = awaitsResponse ? expected : nil
        if let action = decide(input) { outputs.push(action) }
        // A call answered by a Response went out: its wait runs from this decision until the
        // owner says the call returned (`.requested`), then from that reply.
        if awaitsResponse, expected != wasAwaiting || input.isRequested { responseDeadline = now + responseTimeout }
        if !awaitsResponse { responseDeadline = nil }
    }

    public mutating func poll() -> Action? { outputs.pop() }

    public func nextDeadline() -> Instant? { responseDeadline }

    /// The wait for a Response is over: the portal waits for a person nobody is there to be.
    public mutating func handleTimeout(now: Instant) {
        guard let due = responseDeadline, now >= due else { return }
        responseDeadline = nil
        outputs.push(timedOut())
    }

    private mutating func timedOut() -> Action {
        if step == .starting {
            // A Start the portal would grant by itself (a restore token it accepts) answers at
            // once; one still pending after the whole wait is a dialog waiting for a person.
            needsUser = true
            return fail("the ScreenCast portal did not answer Start in time: it is waiting for someone to accept its screen-sharing dialog, and nobody is there"
                + (restoreToken != nil ? " (it did not accept the saved restore token)" : " (no restore token was saved)")
                + "; run castd once in the desktop session and accept the dialog to store a token, or on GNOME use --capture mutter, which needs no dialog")
        }
        return fail("the ScreenCast portal did not answer \(stepName) in time; it may be waiting for someone to accept a screen-sharing dialog, and castd has nobody to click it (run it once in a desktop session to store a restore token)")
    }

    private mutating func decide(_ input: Input) -> Action? {
        switch (step, input) {
        case (.idle, .begin):
            return createSession()
        case (.done, _), (.failed, _), (.idle, _), (_, .begin):
            return nil
        case (_, .requested(let path)):
            if let path, awaitsResponse { expected = path }
            return nil
        case (.closingForRetry, .sessionClosed):
            // Again from the start, without the token: the portal asks in its dialog.
            session = nil
            return createSession()
        case (.closingForRetry, _), (_, .sessionClosed):
            return nil
        case (_, .callFailed(let message)):
            return fail("the ScreenCast portal refused \(stepName): \(message)")
        case (.openingRemote, .remoteOpened):
            step = .done
            let g = grant!
            return .finished(PortalGrant(sessionHandle: session!, streams: g.streams, restoreToken: g.token,
                                         cursorMode: cursorMode, offeredRestoreToken: restoreToken != nil,
                                         refusedRestoreToken: refusedToken))
        case (_, .remoteOpened):
            return nil
        case (_, .response(let path, let code, let handle, let streams, let token)):
            guard path == expected else { return nil }   // another request's signal
            if code == 2, step == .starting, restoreToken != nil, !refusedToken, let session {
                // A stale or refused token: forget it and ask again.
                refusedToken = true
                restoreToken = nil
                step = .closingForRetry
                expected = nil
                return .call(.closeSession(session: session), expect: nil)
            }
            guard code == 0 else {
                return fail(code == 1
                    ? "screen sharing was cancelled in the portal's dialog (\(stepName))"
                    : "the ScreenCast portal ended \(stepName) with an error (response \(code))"
                        + (refusedToken ? " (also after dropping the saved restore token)" : ""))
            }
            switch step {
            case .creatingSession:
                guard let handle, !handle.isEmpty else { return fail("the ScreenCast portal created a session without a handle") }
                session = handle
                step = .selectingSources
                let t = nextToken()
                expected = requestPath(token: t)
                return .call(.selectSources(session: handle, handleToken: t, types: sourceTypes, cursorMode: cursorMode.rawValue,
                                            persistMode: 2, restoreToken: restoreToken), expect: expected)
            case .selectingSources:
                step = .starting
                let t = nextToken()
                expected = requestPath(token: t)
                return .call(.start(session: session!, handleToken: t), expect: expected)
            case .starting:
                guard !streams.isEmpty else { return fail("the ScreenCast portal started a cast with no stream") }
                grant = (streams.map { Self.asAskedFor($0, types: sourceTypes) }, token)
                step = .openingRemote
                expected = nil
                return .call(.openPipeWireRemote(session: session!), expect: nil)
            default:
                return nil
            }
        }
    }

    private var stepName: String {
        switch step {
        case .idle: return "nothing"
        case .creatingSession: return "CreateSession"
        case .selectingSources: return "SelectSources"
        case .starting: return "Start"
        case .openingRemote: return "OpenPipeWireRemote"
        case .closingForRetry: return "Session.Close"
        case .done: return "nothing (done)"
        case .failed: return "nothing (failed)"
        }
    }

    private mutating func fail(_ message: String) -> Action {
        let sentence = "ScreenCast portal: " + message + "."
        step = .failed
        if let session { return .closeAndFail(.closeSession(session: session), failure: sentence) }
        return .failed(sentence)
    }
}

extension ScreenCastPortalMachine.Input {
    var isRequested: Bool { if case .requested = self { return true }; return false }
}
