import CastCore
import CastSignaling
import CastOpenSSL
import CastSystem
import FoundationEssentials

/// The IO shell around `RealtimeClient` and `SignalingMerger` for one
/// session (spec §5): subscribes to the session row and its signaling rows,
/// backfills over REST after every SUBSCRIBED, pushes refreshed tokens to
/// the channel, and reports each row addressed to the sender exactly once.
///
/// One task owns all protocol state; the socket thread, timers, token ticks
/// and REST answers reach it only as inputs on one stream, in order.
public final class SignalingSubscription: Sendable {
    public enum Event: Sendable, Equatable {
        case subscribed
        case row(SignalingRow)
        case status(SessionStatus)
        /// Realtime dropped; it reconnects by itself, and the next backfill covers the gap.
        case interrupted(reason: String)
        /// Something worth one log line, as its own event (never carries a token).
        case log(LogLine)
        /// The identity is dead or gone: nothing more will arrive.
        case failed(CastError)
    }

    enum Input: Sendable {
        case ws(generation: Int, WebSocketEvent)
        case timer(generation: Int)
        case token(Redacted<String>)
        case backfilled(epoch: Int, rows: [SignalingRow], status: SessionStatus?)
        case backfillFailed(epoch: Int, String)
        case fatal(CastError)
        case stop
    }

    public let events: AsyncStream<Event>
    private let output: AsyncStream<Event>.Continuation
    private let inputs: AsyncStream<Input>
    private let input: AsyncStream<Input>.Continuation
    private let sessionID: String
    private let websocketURL: String
    private let identity: SenderIdentity
    private let rest: RESTClient
    private let vsn: PhoenixEnvelope.Version
    private let connector: WebSocketClient.Connector

    public init(sessionID: String, config: SignalingConfig, identity: SenderIdentity, rest: RESTClient,
                vsn: PhoenixEnvelope.Version = .v2, connector: @escaping WebSocketClient.Connector = WebSocketClient.defaultConnector) {
        self.sessionID = sessionID.lowercased()
        self.identity = identity
        self.rest = rest
        self.vsn = vsn
        self.connector = connector
        websocketURL = Self.websocketURL(config: config, vsn: vsn)
        (events, output) = AsyncStream.makeStream(of: Event.self)
        (inputs, input) = AsyncStream.makeStream(of: Input.self)
    }

    /// docs/contract.md, wire C: `wss://<host>/realtime/v1/websocket?apikey=<key>&vsn=…`.
    /// The key is the publishable one (public by design, spec §2).
    public static func websocketURL(config: SignalingConfig, vsn: PhoenixEnvelope.Version) -> String {
        var base = config.supabaseURL
        if base.hasSuffix("/") { base.removeLast() }
        if base.hasPrefix("https://") { base = "wss://" + base.dropFirst(8) } else if base.hasPrefix("http://") { base = "ws://" + base.dropFirst(7) }
        return "\(base)/realtime/v1/websocket?apikey=\(percentEncoded(config.supabaseKey))&vsn=\(vsn.rawValue)"
    }

    /// Every byte but ASCII letters and digits as %XX (RFC 3986 §2.1), so the key
    /// cannot end the query parameter early.
    static func percentEncoded(_ s: String) -> String {
        var out = ""
        for b in s.utf8 {
            if (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) {
                out.unicodeScalars.append(Unicode.Scalar(b))
            } else {
                out += "%" + String(b >> 4, radix: 16, uppercase: true) + String(b & 0xf, radix: 16, uppercase: true)
            }
        }
        return out
    }

    /// Runs until `stop()` or a fatal error; call once.
    public func run() async {
        let token: Redacted<String>
        do { token = try await identity.accessToken() } catch {
            output.yield(.failed(error as? CastError ?? CastError(.authFailed, "\(error)")))
            output.finish()
            return
        }
        var loop = Loop(owner: self, client: RealtimeClient(config: .session(sessionID, vsn: vsn), accessToken: token),
                        merger: SignalingMerger(sessionID: sessionID))
        let ticker = Task { [identity, input] in
            // docs/contract.md, wire A: check every 30 s.
            while !Task.isCancelled {
                try? await Task.sleep(for: RefreshPolicy.tickInterval)
                if Task.isCancelled { break }
                do {
                    if let t = try await identity.tick() { input.yield(.token(t.accessToken)) }
                } catch let e as ServerError where e.code == .sessionDead {
                    input.yield(.fatal(e.castError))
                } catch let e as CastError where e.code == .noCredentials {
                    input.yield(.fatal(e))
                } catch {
                    // Network trouble: the next tick (or the before-call rule) tries again.
                }
            }
        }
        defer { ticker.cancel() }
        loop.feed(.start)
        for await i in inputs {
            if !loop.handle(i) { break }
        }
        loop.shutdown()
        output.finish()
    }

    public func stop() { input.yield(.stop) }

    /// The state of the run loop (owned by `run`'s task only).
    struct Loop {
        let owner: SignalingSubscription
        var client: RealtimeClient
        var merger: SignalingMerger
        let clock = SystemMonotonicClock()
        var socket: WebSocketClient?
        var generation = 0
        var timer: Task<Void, Never>?
        var timerGeneration = 0
        /// The deadline the running timer was armed for (nil: none armed).
        var timerDeadline: Instant?

        mutating func handle(_ i: Input) -> Bool {
            let now = clock.now()
            switch i {
            case .ws(let g, let e):
                guard g == generation else { return true }   // from a socket castd already left
                switch e {
                case .open: feed(.socketOpened, now: now)
                case .text(let t): feed(.text(t), now: now)
                case .binary: break
                case .closed(let code, _, let err):
                    socket = nil
                    if let err, err.code == .certificate {
                        // TLS verification refused the server: retrying cannot help (issue 8 §7).
                        owner.output.yield(.failed(err))
                        return false
                    }
                    feed(.socketClosed(reason: err?.message ?? "closed (\(code))"), now: now)
                }
            case .timer(let g):
                if g == timerGeneration {
                    timerDeadline = nil   // fired: whatever the deadline is now, arm a new timer
                    client.handleTimeout(now: now)
                    merger.handleTimeout(now: now)   // a failed backfill asked again, when due
                    emit()
                    perform()
                }
            case .token(let t):
                feed(.accessToken(t), now: now)
            case .backfilled(let epoch, let rows, let status):
                merge(.backfillCompleted(epoch: epoch, rows: rows, status: status), now: now)
                armTimer()
            case .backfillFailed(let epoch, let why):
                owner.output.yield(.log(LogLine(.warning, "backfill_failed", [("error", why), ("retry_s", Int(merger.retryDelay.components.seconds))])))
                merge(.backfillFailed(epoch: epoch), now: now)   // asked again at the merger's deadline
                armTimer()
            case .fatal(let e):
                owner.output.yield(.failed(e))
                return false
            case .stop:
                return false
            }
            return true
        }

        mutating func shutdown() {
            feed(.stop)
            timer?.cancel()
        }

        /// One input to the client, then its outputs carried out (the `SansIO` contract).
        mutating func feed(_ input: RealtimeClient.Input, now: Instant? = nil) {
            client.handle(input, now: now ?? clock.now())
            perform()
        }

        /// Drains the client's actions in order, then arms one timer for its next deadline.
        mutating func perform() {
            while let a = client.poll() {
                switch a {
                case .openSocket:
                    generation += 1
                    do {
                        let ws = try WebSocketClient(url: owner.websocketURL, connector: owner.connector)
                        socket = ws
                        let g = generation, input = owner.input
                        Task { for await e in ws.events { input.yield(.ws(generation: g, e)) } }
                    } catch {
                        owner.input.yield(.ws(generation: generation, .closed(code: 1006, reason: "", error: error as? CastError)))
                    }
                case .closeSocket:
                    socket?.close()
                    socket = nil
                    generation += 1
                case .send(let text):
                    socket?.send(text: text)   // never logged: joins carry the access token
                case .subscribed:
                    owner.output.yield(.subscribed)
                    merge(.subscribed)
                case .change(let c):
                    if let r = c.signalingRow { merge(.realtimeRow(r)) } else if let s = c.sessionStatus { merge(.realtimeStatus(s)) }
                case .closed(let reason):
                    merge(.channelClosed)
                    owner.output.yield(.interrupted(reason: reason))
                case .reconnect(let d):
                    owner.output.yield(.log(LogLine(.notice, "realtime_reconnecting", [("delay_s", d.seconds)])))
                case .log(let w):
                    owner.output.yield(.log(w))
                }
            }
            armTimer()
        }

        /// One timer, for the earlier of the client's and the merger's deadlines; a deadline that
        /// has not moved keeps its timer.
        mutating func armTimer() {
            let deadline = [client.nextDeadline(), merger.nextDeadline()].compactMap { $0 }.min()
            guard deadline != timerDeadline else { return }
            timer?.cancel()
            timerGeneration += 1
            timerDeadline = deadline
            guard let deadline else { timer = nil; return }
            let g = timerGeneration, input = owner.input
            let wait = deadline - clock.now()
            timer = Task {
                if wait > .zero { try? await Task.sleep(for: wait) }
                if !Task.isCancelled { input.yield(.timer(generation: g)) }
            }
        }

        /// One input to the merger, then its outputs carried out (the `SansIO` contract).
        mutating func merge(_ input: SignalingMerger.Input, now: Instant? = nil) {
            merger.handle(input, now: now ?? clock.now())
            emit()
        }

        /// Drains the merger's outputs in order.
        mutating func emit() {
            while let o = merger.poll() {
                switch o {
                case .row(let r): owner.output.yield(.row(r))
                case .status(let s): owner.output.yield(.status(s))
                case .backfill(let epoch):
                    let o = owner
                    Task {
                        do {
                            let token = try await o.identity.accessToken()
                            let rows = try await o.rest.backfill(sessionID: o.sessionID, token: token)
                            let status = try await o.rest.sessionStatus(sessionID: o.sessionID, token: token)
                            o.input.yield(.backfilled(epoch: epoch, rows: rows, status: status))
                        } catch {
                            o.input.yield(.backfillFailed(epoch: epoch, "\(error)"))
                        }
                    }
                }
            }
        }
    }
}
