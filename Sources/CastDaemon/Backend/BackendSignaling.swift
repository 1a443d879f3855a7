import CastCore
import CastIO
import CastSession
import CastSignaling
import FoundationEssentials

/// The session's signaling through the real backend: Supabase Realtime +
/// REST (subscribe, then backfill, de-duplicated by `SignalingSubscription`),
/// and `/api/public/session-update`. Maps wire events to `SessionMachine`
/// inputs and classifies every failure into what the machine needs to know.
public final class BackendSignaling: SignalingPort, @unchecked Sendable {
    private let sessionID: String
    private let identity: SenderIdentity
    private let rest: RESTClient
    private let api: APIClient
    private let subscription: SignalingSubscription
    private let wall: WallClockMapping
    private let log: LogSink

    public init(sessionID: String, config: SignalingConfig, identity: SenderIdentity,
                transport: HTTPTransport, clock: MonotonicClock, log: LogSink,
                connector: @escaping WebSocketClient.Connector = WebSocketClient.defaultConnector) {
        self.sessionID = sessionID.lowercased()
        self.identity = identity
        let endpoints = Endpoints(config: config)
        rest = RESTClient(endpoints: endpoints, transport: transport)
        api = APIClient(endpoints: endpoints, transport: transport)
        subscription = SignalingSubscription(sessionID: sessionID, config: config, identity: identity, rest: rest,
                                             connector: connector)
        wall = WallClockMapping(clock: clock)
        self.log = log
    }

    public func events() -> AsyncStream<SessionMachine.Input> {
        let (stream, out) = AsyncStream.makeStream(of: SessionMachine.Input.self)
        let sub = subscription, wall = self.wall, log = self.log
        Task { await sub.run() }
        Task {
            var ready = false
            for await e in sub.events {
                switch e {
                case .subscribed:
                    log.write(LogLine(.info, "subscribed"))
                case .status(let s):
                    if ready { out.yield(.statusChanged(s)) } else { ready = true; out.yield(.ready(status: s)) }
                case .row(let r):
                    let m = SignalingMessage(row: r)
                    log.write(LogLine(.debug, "row", [("type", r.messageType), ("id", r.id)]))
                    switch m {
                    case .joinApproved(let expires, let prefs):
                        out.yield(.approved(authExpiresAt: wall.instant(forISO: expires), prefs: prefs))
                    case .invalid(let type, let why):
                        log.write(LogLine(.warning, "row_ignored", [("type", type), ("why", why)]))
                    default:
                        out.yield(.signal(m))
                    }
                case .interrupted(let reason):
                    log.write(LogLine(.warning, "realtime_interrupted", [("reason", reason)]))
                case .log(let w):
                    log.write(w)
                case .failed(let err):
                    log.write(LogLine(.error, "signaling_failed", [("code", err.code), ("message", err.message)]))
                    out.yield(.signalingFailed(err.message))
                }
            }
            out.finish()
        }
        return stream
    }

    public func insert(_ row: OutgoingSignal) async -> SignalingOutbox<OutgoingSignal>.Outcome {
        do {
            let token = try await identity.accessToken()
            try await rest.insert(OutgoingSignalingRow(sessionID: sessionID, message: row), token: token)
            return .inserted
        } catch let e as ServerError {
            log.write(LogLine(.warning, "insert_failed", [("type", row.messageType), ("code", e.code), ("status", e.status)]))
            switch e.code {
            case .payloadTooLarge: return .tooLarge
            case .tooManyRows: return .rateLimited
            case .forbidden, .sessionDead, .unauthorized: return .dropped
            default: return e.isRetryable ? .transient : .dropped
            }
        } catch {
            log.write(LogLine(.warning, "insert_failed", [("type", row.messageType), ("error", "\(error)")]))
            return .transient
        }
    }

    public func sessionUpdate(_ action: SessionUpdateAction) async -> SessionUpdateResult {
        do {
            let token = try await identity.accessToken()
            let r = try await api.sessionUpdate(sessionID: sessionID, action: action, token: token)
            return .ok(authExpiresAt: wall.instant(forISO: r.senderAuthExpiresAt))
        } catch let e as ServerError {
            log.write(LogLine(.warning, "session_update_failed", [("action", action.rawValue), ("code", e.code)]))
            switch e.code {
            case .notFound: return .notFound
            case .invalidState: return .invalidState
            case .sessionDead: return .notFound
            default: return .transient
            }
        } catch {
            return .transient
        }
    }

    public func close() async { subscription.stop() }
}
