import CastSession

/// How a running cast shows itself on the desktop, decided without IO: the state name the
/// runtime registry carries, and the notifications (org.freedesktop.Notifications) a person
/// sees — one when the screen starts reaching the receiver, updated if what is shared changes,
/// replaced by one saying why when the cast ends. `DesktopNotifier` sends them.
public struct CastPresence: Sendable {
    /// A notification to show (or to put in place of the one shown).
    public struct Notice: Equatable, Sendable {
        public var summary: String
        public var body: String
        /// Carries the "Stop casting" action and stays until replaced (resident).
        public var stoppable: Bool

        /// For a notification service without actions (no "actions" capability): the body says
        /// how to stop instead of a button that would not be shown.
        public var withoutActions: Notice {
            guard stoppable else { return self }
            return Notice(summary: summary, body: body + " To stop it: castd stop", stoppable: false)
        }
    }

    public let sessionId: String
    public var sharing: String
    public let notify: Bool
    private(set) public var activity: SessionMachine.Activity = .starting
    private var everConnected = false
    private var audio = false
    private var shown: Notice? = nil
    private var stopChosen = false

    public init(sessionId: String, sharing: String, notify: Bool) {
        self.sessionId = sessionId
        self.sharing = sharing
        self.notify = notify
    }

    /// The registry's `state`.
    public var state: String {
        switch activity {
        case .starting: return "starting"
        case .waitingForApproval: return "waiting_for_approval"
        case .negotiating: return everConnected ? "reconnecting" : "negotiating"
        case .connected: return "casting"
        case .restartingMedia: return "restarting_media"
        case .ended: return "ending"
        }
    }

    /// Desktop audio is reaching the receiver (as the registry says it).
    public var audioSent: Bool { activity == .connected && audio }

    /// The receiver as the sender knows it: the contract gives it no name, only its session.
    var receiver: String { "the receiver of session \(sessionId.prefix(8))" }

    /// The session moved; the notice to show, if any.
    public mutating func activityChanged(_ a: SessionMachine.Activity) -> Notice? {
        activity = a
        if a == .connected { everConnected = true }
        return update()
    }

    /// The peer's answer took audio (or no longer does).
    public mutating func audioChanged(_ on: Bool) -> Notice? {
        audio = on
        return update()
    }

    /// The person chose "Stop casting" on the notification.
    public mutating func stopChosenFromNotification() { stopChosen = true }

    /// While casting, the notice says what is shared; it is shown again only when that changes.
    private mutating func update() -> Notice? {
        guard notify, activity == .connected else { return nil }
        let what = audio ? "Your screen and desktop audio are" : "Your screen is"
        let n = Notice(summary: audio ? "Sharing your screen and audio" : "Sharing your screen",
                       body: "\(what) being sent to \(receiver) (\(sharing)).", stoppable: true)
        guard n != shown else { return nil }
        shown = n
        return n
    }

    /// The cast is over: the notice saying why. None after a clean stop of a cast that never
    /// reached the receiver (the person who stopped it knows), or with notifications off.
    public func ended(exitCode: Int32, message: String) -> Notice? {
        guard notify else { return nil }
        if exitCode == 0 && shown == nil { return nil }
        if stopChosen { return Notice(summary: "Casting stopped", body: "You stopped casting; \(receiver) no longer receives your screen.", stoppable: false) }
        if exitCode == 0 { return Notice(summary: "Casting stopped", body: "\(message) Your screen is no longer sent to \(receiver).", stoppable: false) }
        return Notice(summary: shown == nil ? "Casting could not start" : "Casting ended",
                      body: "\(message) Your screen is no longer sent to \(receiver).", stoppable: false)
    }
}
