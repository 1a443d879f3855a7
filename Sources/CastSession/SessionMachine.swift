import CastCore
import CastSignaling

/// The sender's session logic (spec §5, §6, §9, §10, §11), as a pure state
/// machine under the one sans-IO contract (`SansIO` in CastCore): the owner feeds
/// `Input`s with the current time, drains `Action`s with `poll()`, and calls
/// `handleTimeout(now:)` at `nextDeadline()`. It never reads a clock, sleeps or
/// does IO (docs/architecture.md, "One sans-IO contract"), so every rule below is tested on a fake clock.
public struct SessionMachine: Sendable, SansIO {
    public struct Configuration: Sendable {
        public var reconnect = ReconnectPolicy()
        /// spec §10: heartbeat every 30 s while connected.
        public var heartbeatInterval: Duration = .seconds(30)
        /// How long a status change to `disconnected` waits for its disconnect row.
        public var disconnectRowGrace: Duration = .seconds(1)
        /// castd's own rows per minute (spec §6 caps the session at 200, both sides).
        public var rowLimit = 100
        public var rowWindow: Duration = .seconds(60)
        /// Media failures (encoder or capture) are answered by reopening the media: after the
        /// n-th failure within `mediaFailureWindow`, wait `mediaRestartBackoff[n-1]`, then
        /// start again; one failure more than the list is long ends the cast (issue 17).
        public var mediaRestartBackoff: [Duration] = [.seconds(1), .seconds(2), .seconds(4)]
        public var mediaFailureWindow: Duration = .seconds(60)
        public init() {}
    }

    public enum Input: Sendable, Equatable {
        /// Subscribed, backfilled (its rows delivered before this), and the
        /// session row read: `status` is its current status.
        case ready(status: SessionStatus)
        /// `join_approved`, with `senderAuthExpiresAt` converted by the shell to the monotonic clock.
        case approved(authExpiresAt: Instant?, prefs: StreamPrefs)
        /// Any other row addressed to the sender (already de-duplicated by row id).
        case signal(SignalingMessage)
        /// A status change of the session row (Realtime UPDATE).
        case statusChanged(SessionStatus)
        /// The peer session for `negotiationId` produced its offer.
        case offerReady(negotiationId: String, sdp: String)
        case localCandidate(IceCandidatePayload)
        case gatheringComplete(negotiationId: String)
        case peerState(negotiationId: String, PeerConnectionState)
        /// The answer could not be applied (bad SDP, rejected video, fingerprint…).
        case answerFailed(negotiationId: String, message: String)
        /// The answer shares no video codec with the offer (issue 15): a clear end whose
        /// disconnect row says why.
        case noCommonCodec(negotiationId: String, message: String)
        case insertFinished(SignalingOutbox<OutgoingSignal>.Outcome)
        case sessionUpdateFinished(SessionUpdateAction, SessionUpdateResult)
        /// SIGTERM / SIGINT: the user stops the cast.
        case stopRequested
        /// The signaling layer cannot go on (the identity is dead, the backend refuses us).
        case signalingFailed(String)
        /// Capture waits for a person who is not there (the portal's dialog): the sentence says so.
        case captureNeedsUser(String)
        /// The encoder or the capture stopped making progress or failed (issue 17); `reason` is
        /// a short sentence for the log and, past the restarts, for the user.
        case mediaFailed(String)
        /// What was shared is gone for good (issue 31: the shared window was closed); the
        /// sentence says so. The cast ends cleanly: there is nothing left to show.
        case sourceEnded(String)
    }

    public enum Action: Sendable, Equatable {
        /// Start capture and encoding for these preferences (capped by the media layer).
        case startMedia(StreamPrefs)
        case stopMedia
        /// Create a fresh peer session and produce its offer (answered by `.offerReady`).
        case createPeer(negotiationId: String)
        case closePeer
        case applyAnswer(negotiationId: String, sdp: String)
        case addRemoteCandidate(IceCandidatePayload)
        case remoteEndOfCandidates(negotiationId: String)
        /// Insert one row; answer with `.insertFinished` (except while ending).
        case insert(OutgoingSignal)
        /// Call session-update; answer with `.sessionUpdateFinished`.
        case sessionUpdate(SessionUpdateAction)
        /// A connection reached `connected` (for sd_notify and logs).
        case connected(negotiationId: String)
        /// One event for the log, with its own level and fields; the shell writes it as it is.
        case log(LogLine)
        /// A receiver row that castd does not act on (another negotiation, a second answer, a
        /// type a sender never handles): logged with the running count (issue 8: every hostile
        /// row gets a counted, logged rejection).
        case rowIgnored(type: String, why: String, total: Int)
        /// Everything before this has been issued; exit with this code and
        /// tell the user this sentence.
        case finish(exitCode: Int32, message: String)
    }

    /// The exit code of a session over for good (already ended, expired, denied, authorization
    /// expired, the receiver gave up): only a new pairing helps. The command line's
    /// `Self.sessionOverExitCode` is this one, and the unit does not restart on it.
    public static let sessionOverExitCode: Int32 = 3

    enum Phase: Sendable, Equatable {
        case awaitingReady
        case awaitingApproval
        case negotiating(since: Instant)
        case connected
        case disconnected(since: Instant)
        case waitingToRetry(until: Instant)
        case ended
    }

    public let configuration: Configuration
    private let makeNegotiationId: @Sendable () -> String

    private(set) var phase: Phase = .awaitingReady
    public private(set) var negotiationId: String? = nil
    private var reconnect: ReconnectPolicy
    private var outbox: SignalingOutbox<OutgoingSignal>
    private var approval: (authExpiresAt: Instant?, prefs: StreamPrefs)? = nil
    private var mediaStarted = false
    /// When a media restart is due (media stopped after a failure), and the recent failures.
    private var mediaRestartAt: Instant? = nil
    private var mediaFailures: [Instant] = []
    private var offerQueued = false
    private var answerApplied = false
    private var pendingLocal: [OutgoingSignal] = []
    private var bufferedRemote: [IceCandidatePayload] = []
    private var remoteEnded = false
    private var heartbeatDue: Instant? = nil
    private var statusEndAt: Instant? = nil
    private var authExpiresAt: Instant? = nil
    private var actions = OutputQueue<Action>()
    public private(set) var ignoredRows = 0

    public init(configuration: Configuration = Configuration(),
                makeNegotiationId: @escaping @Sendable () -> String) {
        self.configuration = configuration
        self.makeNegotiationId = makeNegotiationId
        reconnect = configuration.reconnect
        outbox = SignalingOutbox(limit: configuration.rowLimit, window: configuration.rowWindow)
    }

    public var isEnded: Bool { phase == .ended }

    /// The disconnect reason when capture needs a person and none is there (not one of the
    /// four of docs/contract.md "Signaling rows": the receiver shows it raw, which says what to do).
    public static let captureNeedsUserReason = DisconnectReason.other("capture_needs_user")
    /// The disconnect reason when the receiver can decode none of the offered video codecs.
    public static let noCommonCodecReason = DisconnectReason.other("no_common_codec")

    /// The disconnect reason when the screen could not be captured or encoded even after the
    /// restarts (shown raw by the receiver, like the one above).
    public static let mediaFailedReason = DisconnectReason.other("media_failed")
    /// The disconnect reason when the shared window was closed (issue 31; shown raw by the receiver).
    public static let sourceEndedReason = DisconnectReason.other("shared_window_closed")

    /// What the session is doing, as far as the systemd watchdog is concerned (issue 17):
    /// while media runs it must make progress; everything else is a wait the machine bounds
    /// with its own timers (approval, answer, §11 backoff, a media restart's backoff).
    public enum Activity: Sendable, Equatable {
        /// Not yet subscribed and read the session row.
        case starting
        case waitingForApproval
        /// Offer out, waiting for the answer and the connection (or reconnecting, spec §11).
        case negotiating
        case connected
        case restartingMedia
        case ended
    }

    public var activity: Activity {
        switch phase {
        case .ended: return .ended
        case .awaitingReady: return .starting
        case .awaitingApproval: return .waitingForApproval
        default: break
        }
        if mediaRestartAt != nil { return .restartingMedia }
        if phase == .connected { return .connected }
        return .negotiating
    }

    /// Media has been started and not stopped: frames must be coming.
    public var mediaRunning: Bool { mediaStarted && phase != .ended }

    // MARK: - Driving

    public mutating func poll() -> Action? {
        actions.pop()
    }

    public func nextDeadline() -> Instant? {
        guard phase != .ended else { return nil }
        if let t = statusEndAt { return t }
        var candidates: [Instant?] = [heartbeatDue, authExpiresAt, outbox.nextDeadline(), mediaRestartAt]
        switch phase {
        case .negotiating(let since): candidates.append(since + configuration.reconnect.attemptTimeout)
        case .disconnected(let since): candidates.append(since + configuration.reconnect.disconnectedGrace)
        case .waitingToRetry(let until): candidates.append(until)
        default: break
        }
        return candidates.compactMap { $0 }.min()
    }

    public mutating func handle(_ input: Input, now: Instant) {
        guard phase != .ended else { return }
        if statusEndAt != nil {
            // The session is over; only its disconnect row (for its reason) or a stop matter.
            switch input {
            case .signal(.disconnect), .stopRequested: break
            default: return
            }
            if input == .stopRequested { finishQuietly(exitCode: 0, "The broadcasting session has ended."); return }
        }
        switch input {
        case .ready(let status):
            guard phase == .awaitingReady else { return }
            if status.isFinal {
                finishQuietly(exitCode: Self.sessionOverExitCode, "The session is already over (status \(status.raw)); pair again.")
                return
            }
            phase = .awaitingApproval
            if approval != nil, status == .connecting || status == .connected { beginCast(now: now) }

        case .approved(let expires, let prefs):
            // Issue 17: RLS lets the receiver insert any row addressed to the sender, so a second
            // `join_approved` mid-cast is possible. Only the first approval counts: a later one
            // must not move the authorization's expiry or the stream preferences.
            guard approval == nil else { ignore("join_approved", "already approved"); break }
            approval = (expires, prefs)
            authExpiresAt = expires
            if phase == .awaitingApproval { beginCast(now: now) }

        case .signal(let s):
            handleSignal(s, now: now)

        case .statusChanged(let status):
            switch status {
            case .disconnected:
                // The backend changes the status and inserts the disconnect row
                // together; the status may arrive first. Stop at once, but wait
                // briefly for the row, whose reason says more (spec §9).
                guard statusEndAt == nil else { break }
                statusEndAt = now + configuration.disconnectRowGrace
                outbox.removeQueued { _ in true }
                if mediaStarted { actions.push(.stopMedia); mediaStarted = false }
                mediaRestartAt = nil
                if negotiationId != nil { actions.push(.closePeer); negotiationId = nil }
            case .expired:
                finishQuietly(exitCode: Self.sessionOverExitCode, "The session expired before it was approved; pair again.")
            case .connecting, .connected:
                if phase == .awaitingApproval, approval != nil { beginCast(now: now) }
            case .waiting, .pairing, .other:
                break
            }

        case .offerReady(let nid, let sdp):
            guard nid == negotiationId, !offerQueued else { return }
            offerQueued = true
            outbox.enqueue(.offer(sdp: sdp, negotiationID: nid))
            for row in pendingLocal { outbox.enqueue(row) }
            pendingLocal.removeAll()

        case .localCandidate(let c):
            guard c.negotiationID == negotiationId else { return }
            enqueueLocal(.iceCandidate(c))

        case .gatheringComplete(let nid):
            guard nid == negotiationId else { return }
            enqueueLocal(.endOfCandidates(negotiationID: nid))

        case .peerState(let nid, let state):
            guard nid == negotiationId else { return }
            handlePeerState(state, now: now)

        case .answerFailed(let nid, let message):
            guard nid == negotiationId else { return }
            // Not a network fault: a new offer would fail the same way.
            endAsSender(reason: .failed, exitCode: 1, message: "The receiver's answer cannot be used: \(message)")

        case .noCommonCodec(let nid, let message):
            guard nid == negotiationId else { return }
            // A new offer would carry the same codecs: end, and tell the receiver why.
            endAsSender(reason: Self.noCommonCodecReason, exitCode: 1, message: "The receiver cannot show this cast: \(message)")

        case .insertFinished(let outcome):
            outbox.completed(outcome, now: now)
            if outcome == .tooLarge {
                actions.push(.log(LogLine(.error, "signaling_row_too_large", [("sqlstate", "54000"), ("note", "payload over 64 KB: a castd bug, row dropped")])))
            } else if outcome == .rateLimited {
                actions.push(.log(LogLine(.warning, "signaling_rate_limited", [("sqlstate", "P0429"), ("note", "backing off")])))
            }

        case .sessionUpdateFinished(let action, let result):
            handleSessionUpdate(action, result, now: now)

        case .stopRequested:
            endAsSender(reason: .senderEnded, exitCode: 0, message: "Cast stopped.")

        case .signalingFailed(let message):
            finishQuietly(exitCode: 1, "Signaling failed: \(message)")

        case .captureNeedsUser(let sentence):
            // Not a network fault: retrying cannot help until someone accepts the dialog. The
            // receiver learns why from the reason (docs/contract.md: unknown reasons are shown raw).
            endAsSender(reason: Self.captureNeedsUserReason, exitCode: 1, message: sentence)

        case .mediaFailed(let reason):
            mediaFailed(Self.printable(reason, limit: 160), now: now)

        case .sourceEnded(let sentence):
            actions.push(.log(LogLine(.notice, "source_ended", [("reason", sentence), ("disconnect", "shared_window_closed")])))
            endAsSender(reason: Self.sourceEndedReason, exitCode: 0, message: sentence.prefix(1).uppercased() + sentence.dropFirst() + ".")
        }
        pump(now: now)
    }

    public mutating func handleTimeout(now: Instant) {
        guard phase != .ended else { return }
        if let t = statusEndAt {
            if now >= t { finishQuietly(exitCode: 0, "The broadcasting session has ended.") }
            return
        }
        if let t = authExpiresAt, now >= t {
            finishQuietly(exitCode: Self.sessionOverExitCode, "Authorization expired; pair again.")
            return
        }
        if let t = mediaRestartAt, now >= t, let approval {
            mediaRestartAt = nil
            mediaStarted = true
            actions.push(.log(LogLine(.notice, "media_restart")))
            actions.push(.startMedia(approval.prefs))
        }
        switch phase {
        case .negotiating(let since) where now >= since + configuration.reconnect.attemptTimeout:
            actions.push(.log(LogLine(.warning, "negotiation_timeout", [("negotiation", negotiationId ?? "-")])))
            connectionLost(now: now)
        case .disconnected(let since) where now >= since + configuration.reconnect.disconnectedGrace:
            actions.push(.log(LogLine(.warning, "disconnected_too_long", [("negotiation", negotiationId ?? "-")])))
            connectionLost(now: now)
        case .waitingToRetry(let until) where now >= until:
            negotiate(now: now)
        default:
            break
        }
        if phase != .ended, let due = heartbeatDue, now >= due {
            heartbeatDue = now + configuration.heartbeatInterval
            actions.push(.sessionUpdate(.heartbeat))
        }
        pump(now: now)
    }

    // MARK: - Rules

    private mutating func handleSignal(_ s: SignalingMessage, now: Instant) {
        switch s {
        case .joinApproved:
            break   // the shell turns it into `.approved` (it converts the expiry time)

        case .answer(let sdp, let nid):
            // spec §6: answers with any other negotiationId are ignored.
            guard nid == negotiationId else { return ignore("answer", "other negotiation") }
            guard !answerApplied else { return ignore("answer", "answer already applied") }
            answerApplied = true
            actions.push(.applyAnswer(negotiationId: nid, sdp: sdp))
            // spec §6: candidates that arrived early are applied right after the answer.
            for c in bufferedRemote { actions.push(.addRemoteCandidate(c)) }
            bufferedRemote.removeAll()
            if remoteEnded { actions.push(.remoteEndOfCandidates(negotiationId: nid)) }

        case .iceCandidate(let c):
            guard c.negotiationID == negotiationId else { return ignore("ice_candidate", "other negotiation") }
            if answerApplied { actions.push(.addRemoteCandidate(c)) }
            else { bufferedRemote.append(c) }

        case .endOfCandidates(let nid):
            guard nid == negotiationId else { return ignore("ice_candidate", "other negotiation") }
            if answerApplied { actions.push(.remoteEndOfCandidates(negotiationId: nid)) }
            else { remoteEnded = true }

        case .disconnect(let reason):
            switch reason {
            case .receiverEnded, .senderEnded:
                finishQuietly(exitCode: 0, "The receiver ended the session.")
            case .denied:
                finishQuietly(exitCode: Self.sessionOverExitCode, "The receiver denied the request to cast.")
            case .failed:
                finishQuietly(exitCode: Self.sessionOverExitCode, "The receiver gave up reconnecting.")
            case .other(let raw):
                finishQuietly(exitCode: 0, "The receiver ended the session (reason: \(Self.printable(raw))).")
            }

        // Not addressed to a sender's logic; tolerated (docs/contract.md "Signaling rows"), but counted and logged.
        case .joinRequest: ignore("join_request", "a sender does not handle it")
        case .offer: ignore("offer", "a sender does not handle it")
        case .unknown(let type): ignore(type, "unknown type")
        case .invalid(let type, let why): ignore(type, why)
        }
    }

    private mutating func ignore(_ type: String, _ why: String) {
        ignoredRows += 1
        actions.push(.rowIgnored(type: String(type.prefix(64)), why: why, total: ignoredRows))
    }

    private mutating func handlePeerState(_ state: PeerConnectionState, now: Instant) {
        switch state {
        case .connected:
            switch phase {
            case .negotiating, .disconnected:
                let first = phaseWasNegotiating
                phase = .connected
                reconnect.connected()          // spec §11: success resets the counter
                if first {
                    actions.push(.connected(negotiationId: negotiationId ?? ""))
                    actions.push(.sessionUpdate(.connected))
                }
                if heartbeatDue == nil { heartbeatDue = now + configuration.heartbeatInterval }
            default: break
            }
        case .disconnected:
            if phase == .connected { phase = .disconnected(since: now) }
        case .failed:
            switch phase {
            case .negotiating, .connected, .disconnected: connectionLost(now: now)
            default: break
            }
        case .new, .checking, .closed:
            break
        }
    }

    private var phaseWasNegotiating: Bool {
        if case .negotiating = phase { return true }
        return false
    }

    private mutating func handleSessionUpdate(_ action: SessionUpdateAction, _ result: SessionUpdateResult, now: Instant) {
        switch result {
        case .ok(let expires):
            if let expires { authExpiresAt = expires }
        case .notFound:
            if action != .end {
                // spec §10: after expiry session-update answers 404; stop signaling.
                finishQuietly(exitCode: Self.sessionOverExitCode, "Authorization expired; pair again.")
            }
        case .invalidState:
            if action != .end { finishQuietly(exitCode: 0, "The broadcasting session has ended.") }
        case .transient:
            actions.push(.log(LogLine(.info, "session_update_retry", [("action", action.rawValue), ("when", "next heartbeat")])))
        }
    }

    private mutating func beginCast(now: Instant) {
        guard let approval else { return }
        if !mediaStarted {
            mediaStarted = true
            actions.push(.startMedia(approval.prefs))
        }
        negotiate(now: now)
    }

    /// spec §6/§11: every offer gets a fresh negotiationId and a fresh peer.
    private mutating func negotiate(now: Instant) {
        if negotiationId != nil { actions.push(.closePeer) }
        if let old = negotiationId { outbox.removeQueued { $0.negotiationID == old } }
        let nid = makeNegotiationId()
        negotiationId = nid
        offerQueued = false
        answerApplied = false
        remoteEnded = false
        pendingLocal.removeAll()
        bufferedRemote.removeAll()
        phase = .negotiating(since: now)
        actions.push(.log(LogLine(.info, "negotiate", [("negotiation", nid), ("attempt", reconnect.attemptsUsed)])))
        actions.push(.createPeer(negotiationId: nid))
    }

    private mutating func connectionLost(now: Instant) {
        actions.push(.closePeer)
        if let old = negotiationId { outbox.removeQueued { $0.negotiationID == old } }
        switch reconnect.connectionLost() {
        case .retry(let delay, let attempt):
            actions.push(.log(LogLine(.notice, "reconnect", [("attempt", attempt), ("delay_s", delay.seconds)])))
            phase = .waitingToRetry(until: now + delay)
        case .giveUp(let attempts):
            endAsSender(reason: .failed, exitCode: 1,
                        message: "Lost the connection to the receiver and gave up after \(attempts) reconnect attempts.",
                        peerAlreadyClosed: true)
        }
    }

    /// Issue 17: a media failure stops the media and starts it again after a backoff, a
    /// bounded number of times within the window; past that, the cast ends with a reason the
    /// receiver shows and a sentence for the user.
    private mutating func mediaFailed(_ reason: String, now: Instant) {
        guard mediaStarted else {
            // Already stopped (a restart is pending, or the session is not casting): nothing to reopen.
            actions.push(.log(LogLine(.info, "media_failure_ignored", [("reason", reason), ("note", "media not running")])))
            return
        }
        let window = configuration.mediaFailureWindow
        mediaFailures = mediaFailures.filter { now - $0 < window } + [now]
        let backoff = configuration.mediaRestartBackoff
        guard mediaFailures.count <= backoff.count else {
            endAsSender(reason: Self.mediaFailedReason, exitCode: 1,
                        message: "The screen could not be captured or encoded (\(reason)); gave up after \(backoff.count) restarts.")
            return
        }
        let delay = backoff[mediaFailures.count - 1]
        actions.push(.log(LogLine(.warning, "media_failed", [("reason", reason), ("restart", mediaFailures.count),
                                                               ("delay_s", delay.seconds)])))
        actions.push(.stopMedia)
        mediaStarted = false
        mediaRestartAt = now + delay
    }

    private mutating func enqueueLocal(_ row: OutgoingSignal) {
        if offerQueued { outbox.enqueue(row) } else { pendingLocal.append(row) }
    }

    /// The sender ends the session: disconnect row, session-update end, peer closed (spec §9, §12 broadcastFinished).
    private mutating func endAsSender(reason: DisconnectReason, exitCode: Int32, message: String, peerAlreadyClosed: Bool = false) {
        outbox.removeQueued { _ in true }
        mediaRestartAt = nil
        if mediaStarted { actions.push(.stopMedia) }
        if !peerAlreadyClosed && negotiationId != nil { actions.push(.closePeer) }
        actions.push(.insert(.disconnect(reason)))
        actions.push(.sessionUpdate(.end))
        actions.push(.finish(exitCode: exitCode, message: message))
        phase = .ended
    }

    /// The session ended elsewhere (receiver, status, expiry): stop, send nothing.
    private mutating func finishQuietly(exitCode: Int32, _ message: String) {
        outbox.removeQueued { _ in true }
        mediaRestartAt = nil
        if mediaStarted { actions.push(.stopMedia) }
        if negotiationId != nil { actions.push(.closePeer) }
        actions.push(.finish(exitCode: exitCode, message: message))
        phase = .ended
    }

    private mutating func pump(now: Instant) {
        guard phase != .ended else { return }
        if let row = outbox.next(now: now) { actions.push(.insert(row)) }
    }

    /// A remote string shown to the user: printable ASCII only, bounded.
    static func printable(_ s: String, limit: Int = 64) -> String {
        String(s.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7f && $0 != "\"" }.prefix(limit).map(Character.init))
    }
}
