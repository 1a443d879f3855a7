import CastCore

/// Supabase Realtime for one channel, as a value with no IO (docs/contract.md,
/// wire C, following the timings of phoenix.js / supabase-js / supabase-swift).
///
/// It follows the one sans-IO contract (`SansIO` in CastCore): the owner feeds an `Input`
/// with `now`, drains the `Action`s with `poll()`, opening the socket on `.openSocket` and
/// performing every other action in order, then calls `handleTimeout` at `nextDeadline()`.
public struct RealtimeClient: Sendable, SansIO {
    public enum Input: Sendable, Equatable {
        /// Connect and join.
        case start
        /// Leave the channel and close the socket; nothing reconnects.
        case stop
        /// A refreshed access token (pushed to the joined channel, used by later joins).
        case accessToken(Redacted<String>)
        case socketOpened
        /// The socket closed or failed (or castd closed it after `.closeSocket`).
        case socketClosed(reason: String)
        /// A text frame from the server.
        case text(String)
    }

    public enum Action: Sendable, Equatable {
        case openSocket
        case closeSocket
        case send(String)
        /// The channel is subscribed: from now on no change is missed. Every
        /// `.subscribed` after a `.closed` starts a new epoch (backfill again).
        case subscribed
        case change(PostgresChange)
        /// The channel is no longer subscribed; changes may be missed until the next `.subscribed`.
        case closed(reason: String)
        /// The socket will be reopened after this delay.
        case reconnect(after: Duration)
        /// Something worth one log line, as its own event (never carries a token).
        case log(LogLine)
    }

    public struct Config: Sendable {
        public var topic: String
        public var postgresChanges: [JSONValue]
        public var vsn: PhoenixEnvelope.Version = .v2
        /// §C: heartbeat every 25 s; push timeout 10 s.
        public var heartbeatInterval: Duration = .seconds(25)
        public var pushTimeout: Duration = .seconds(10)

        public init(topic: String, postgresChanges: [JSONValue], vsn: PhoenixEnvelope.Version = .v2) {
            self.topic = topic; self.postgresChanges = postgresChanges; self.vsn = vsn
        }

        /// The subscription of spec §5: the session row's UPDATEs and the session's signaling INSERTs.
        public static func session(_ sessionID: String, vsn: PhoenixEnvelope.Version = .v2) -> Config {
            Config(topic: "realtime:castd-\(sessionID)", postgresChanges: [
                .object(["event": .string("UPDATE"), "schema": .string("public"), "table": .string("casting_sessions"),
                         "filter": .string("id=eq.\(sessionID)")]),
                .object(["event": .string("INSERT"), "schema": .string("public"), "table": .string("signaling_messages"),
                         "filter": .string("session_id=eq.\(sessionID)")]),
            ], vsn: vsn)
        }
    }

    enum Socket: Sendable, Equatable {
        case idle
        case connecting
        case open
        case waitingToReconnect(at: Instant)
        case stopped
    }

    enum Channel: Sendable, Equatable {
        case closed
        case joining(ref: String, timeoutAt: Instant)
        case joined(ref: String)
        case subscribed(ref: String)
        case waitingToRejoin(at: Instant)
        case leaving(ref: String)
    }

    public let config: Config
    private var socket: Socket = .idle
    private var channel: Channel = .closed
    private var wantJoined = false
    private var accessToken: Redacted<String>
    private var nextRef: UInt64 = 0
    private var heartbeatAt: Instant?
    private var pendingHeartbeat: String?
    private var socketBackoff = Backoff.socketReconnect
    private var rejoinBackoff = Backoff.channelRejoin
    private var outputs = OutputQueue<Action>()

    public init(config: Config, accessToken: Redacted<String>) {
        self.config = config
        self.accessToken = accessToken
    }

    public var isSubscribed: Bool { if case .subscribed = channel { return true }; return false }

    // MARK: the contract

    public mutating func handle(_ input: Input, now: Instant) {
        switch input {
        case .start: outputs.push(contentsOf: start(now: now))
        case .stop: outputs.push(contentsOf: stop(now: now))
        case .accessToken(let t): outputs.push(contentsOf: updateAccessToken(t, now: now))
        case .socketOpened: outputs.push(contentsOf: socketOpened(now: now))
        case .socketClosed(let reason): outputs.push(contentsOf: socketClosed(now: now, reason: reason))
        case .text(let text): outputs.push(contentsOf: receive(text: text, now: now))
        }
    }

    public mutating func handleTimeout(now: Instant) {
        outputs.push(contentsOf: timeout(now: now))
    }

    public mutating func poll() -> Action? { outputs.pop() }

    /// The earliest instant at which `handleTimeout` has work.
    public func nextDeadline() -> Instant? {
        var d: [Instant] = []
        if socket == .open, let h = heartbeatAt { d.append(h) }
        if case .waitingToReconnect(let at) = socket { d.append(at) }
        if case .joining(_, let t) = channel { d.append(t) }
        if case .waitingToRejoin(let at) = channel, socket == .open { d.append(at) }
        return d.min()
    }

    // MARK: commands

    /// Connects and joins.
    private mutating func start(now: Instant) -> [Action] {
        wantJoined = true
        guard socket == .idle || socket == .stopped else { return [] }
        socket = .connecting
        return [.openSocket]
    }

    /// Leaves the channel and closes the socket; nothing reconnects.
    private mutating func stop(now: Instant) -> [Action] {
        wantJoined = false
        var out: [Action] = []
        switch channel {
        case .joined(let jr), .subscribed(let jr):
            out.append(.send(envelope(joinRef: jr, ref: makeRef(), event: "phx_leave", payload: .object([:]))))
            out.append(.closed(reason: "left"))
        case .joining:
            out.append(.closed(reason: "left"))
        default: break
        }
        channel = .closed
        if socket == .open || socket == .connecting { out.append(.closeSocket) }
        socket = .stopped
        heartbeatAt = nil
        pendingHeartbeat = nil
        return out
    }

    /// docs/contract.md, wire C: after every refresh, push `access_token` on the
    /// joined channel (no reply); later joins carry the new token.
    private mutating func updateAccessToken(_ token: Redacted<String>, now: Instant) -> [Action] {
        accessToken = token
        switch channel {
        case .joined(let jr), .subscribed(let jr):
            return [.send(envelope(joinRef: jr, ref: makeRef(), event: "access_token",
                                   payload: .object(["access_token": .string(token.unredacted)])))]
        default:
            return []
        }
    }

    // MARK: socket events

    private mutating func socketOpened(now: Instant) -> [Action] {
        guard socket == .connecting else { return [] }
        socket = .open
        socketBackoff.reset()
        pendingHeartbeat = nil
        heartbeatAt = now + config.heartbeatInterval
        var out: [Action] = []
        if wantJoined { out += join(now: now) }
        return out
    }

    /// The socket closed or failed (or castd closed it after `.closeSocket`).
    private mutating func socketClosed(now: Instant, reason: String) -> [Action] {
        // Only a live or opening socket can close; a second report of the same close is ignored.
        guard socket == .open || socket == .connecting else { return [] }
        var out: [Action] = []
        switch channel {
        case .joining, .joined, .subscribed, .leaving:
            out.append(.closed(reason: "socket closed: \(reason)"))
        default: break
        }
        // phoenix.js: channels rejoin as soon as the socket is back.
        channel = .closed
        heartbeatAt = nil
        pendingHeartbeat = nil
        let delay = socketBackoff.next()
        socket = .waitingToReconnect(at: now + delay)
        out.append(.reconnect(after: delay))
        return out
    }

    private mutating func timeout(now: Instant) -> [Action] {
        var out: [Action] = []
        if case .waitingToReconnect(let at) = socket, now >= at {
            socket = .connecting
            out.append(.openSocket)
        }
        if socket == .open, let h = heartbeatAt, now >= h {
            if pendingHeartbeat != nil {
                // §C: a heartbeat still unanswered when the next is due → close and reconnect.
                out.append(.log(LogLine(.warning, "realtime_heartbeat_unanswered", [("after_s", config.heartbeatInterval.seconds),
                                                                                     ("effect", "reconnecting")])))
                out.append(.closeSocket)
                out += socketClosed(now: now, reason: "heartbeat timeout")
                return out
            }
            let ref = makeRef()
            pendingHeartbeat = ref
            heartbeatAt = now + config.heartbeatInterval
            out.append(.send(PhoenixEnvelope(joinRef: nil, ref: ref, topic: "phoenix", event: "heartbeat",
                                             payload: .object([:])).encode(config.vsn)))
        }
        if case .joining(_, let t) = channel, now >= t {
            out.append(.log(LogLine(.warning, "realtime_join_timeout", [("after_s", config.pushTimeout.seconds)])))
            out.append(.closed(reason: "join timeout"))
            out += scheduleRejoin(now: now)
        }
        if case .waitingToRejoin(let at) = channel, socket == .open, now >= at {
            out += join(now: now)
        }
        return out
    }

    // MARK: messages

    private mutating func receive(text: String, now: Instant) -> [Action] {
        let m: PhoenixEnvelope
        do { m = try PhoenixEnvelope.decode(text) } catch {
            return [.log(LogLine(.warning, "realtime_message_ignored", [("why", "not a Phoenix envelope")]))]
        }
        var out: [Action] = []
        if m.topic == "phoenix" {
            if m.event == "phx_reply", let r = m.ref, r == pendingHeartbeat { pendingHeartbeat = nil }
            return out
        }
        guard m.topic == config.topic else { return out }
        let status = m.payload["status"]?.stringValue
        let response = m.payload["response"]
        switch m.event {
        case "phx_reply":
            if case .joining(let jr, _) = channel, m.ref == jr {
                if status == "ok" {
                    channel = .joined(ref: jr)
                    // supabase-swift: a join reply that carries postgres_changes means subscribed.
                    if let pc = response?["postgres_changes"]?.arrayValue, !pc.isEmpty {
                        out += markSubscribed(jr)
                    }
                } else {
                    let reason = response?["reason"]?.stringValue ?? "join refused"
                    out.append(.log(LogLine(.warning, "realtime_join_refused", [("reason", reason)])))
                    out.append(.closed(reason: reason))
                    out += scheduleRejoin(now: now)
                }
            } else if case .leaving(let jr) = channel, m.ref != nil, m.joinRef == jr || m.joinRef == nil {
                channel = .closed
            } else if status == "error" {
                out.append(.log(LogLine(.warning, "realtime_push_refused", [("reason", response?["reason"]?.stringValue ?? "unknown")])))
            }
        case "system":
            if status == "ok" {
                switch channel {
                case .joined(let jr): out += markSubscribed(jr)
                default: break
                }
            } else if status == "error" {
                let msg = m.payload["message"]?.stringValue ?? "unknown"
                out.append(.log(LogLine(.warning, "realtime_system_error", [("message", msg)])))
                // Before SUBSCRIBED a system error means the subscription failed: retry.
                if case .joined = channel {
                    out.append(.closed(reason: msg))
                    out += scheduleRejoin(now: now)
                }
            }
        case "postgres_changes":
            guard isCurrent(m) else { break }
            if let c = PostgresChange(payload: m.payload) {
                if let errs = c.errors, !errs.isEmpty { out.append(.log(LogLine(.warning, "realtime_change_errors", [("errors", errs.joined(separator: "; "))]))) }
                out.append(.change(c))
            } else {
                out.append(.log(LogLine(.warning, "realtime_message_ignored", [("why", "postgres_changes without data")])))
            }
        case "phx_error", "phx_close":
            // §C: these carry ref = join_ref; ones from an older join are stale.
            let current: String? = {
                switch channel {
                case .joining(let jr, _), .joined(let jr), .subscribed(let jr), .leaving(let jr): return jr
                default: return nil
                }
            }()
            guard let jr = current, (m.joinRef ?? m.ref) == jr || (m.joinRef == nil && m.ref == nil) else { break }
            if case .leaving = channel { channel = .closed; break }
            out.append(.closed(reason: m.event == "phx_error" ? "channel error" : "closed by server"))
            // The server closes the channel when the token expires; the rejoin carries the current token.
            out += scheduleRejoin(now: now)
        default:
            break
        }
        return out
    }

    // MARK: internals

    private func isCurrent(_ m: PhoenixEnvelope) -> Bool {
        switch channel {
        case .joined, .subscribed: return true
        default: return false
        }
    }

    private mutating func markSubscribed(_ jr: String) -> [Action] {
        if case .subscribed = channel { return [] }
        channel = .subscribed(ref: jr)
        rejoinBackoff.reset()
        return [.subscribed]
    }

    private mutating func join(now: Instant) -> [Action] {
        let ref = makeRef()
        channel = .joining(ref: ref, timeoutAt: now + config.pushTimeout)
        let payload: JSONValue = .object([
            "config": .object([
                "broadcast": .object(["ack": .bool(false), "self": .bool(false)]),
                "presence": .object(["key": .string(""), "enabled": .bool(false)]),
                "postgres_changes": .array(config.postgresChanges),
                "private": .bool(false),
            ]),
            "access_token": .string(accessToken.unredacted),
        ])
        return [.send(envelope(joinRef: ref, ref: ref, event: "phx_join", payload: payload))]
    }

    private mutating func scheduleRejoin(now: Instant) -> [Action] {
        let delay = rejoinBackoff.next()
        channel = .waitingToRejoin(at: now + delay)
        return []
    }

    private mutating func makeRef() -> String {
        nextRef += 1
        return String(nextRef)
    }

    private func envelope(joinRef: String?, ref: String?, event: String, payload: JSONValue) -> String {
        PhoenixEnvelope(joinRef: joinRef, ref: ref, topic: config.topic, event: event, payload: payload).encode(config.vsn)
    }
}
