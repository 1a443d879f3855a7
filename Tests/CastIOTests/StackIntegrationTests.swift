import CastCore
import Foundation
import Synchronization
import Testing
@testable import CastIO
@testable import CastSignaling

/// Integration tests against the local stack (Scripts/devstack). They run
/// only when CASTD_TEST_STACK=1 and the three CASTD_* variables printed by
/// `Scripts/devstack up` are set; otherwise they are skipped with that note.
/// Start the stack with `--access-token-ttl 60` for the refresh test.
enum Stack {
    static let env = ProcessInfo.processInfo.environment
    static let config: SignalingConfig? = env["CASTD_TEST_STACK"] == "1" ? try? SignalingConfig.fromEnvironment(env).get() : nil
    static var enabled: Bool { config != nil }
    static let skipNote: Comment = "set CASTD_TEST_STACK=1 and CASTD_API_URL/CASTD_SUPABASE_URL/CASTD_SUPABASE_KEY from `Scripts/devstack up`"
}

/// Adds a fixed X-Forwarded-For so each test has its own pairing budget
/// (the stack reads the client IP from it, spec §4).
struct ForwardedForTransport: HTTPTransport {
    let inner: HTTPTransport
    let ip: String
    func send(method: String, url: URL, headers: [String: String], body: [UInt8]?, timeout: Duration) async throws -> HTTPResponse {
        var h = headers
        h["X-Forwarded-For"] = ip
        return try await inner.send(method: method, url: url, headers: h, body: body, timeout: timeout)
    }
}

/// One party (sender or receiver) with its own identity directory.
struct Party {
    let config: SignalingConfig
    let transport: HTTPTransport
    let identity: SenderIdentity
    let api: APIClient
    let rest: RESTClient
    let dir: String

    init(_ config: SignalingConfig, dir: String? = nil, clockSkew: Int64 = 0) {
        self.config = config
        let ip = "10.\(UInt8.random(in: 0...255)).\(UInt8.random(in: 0...255)).\(UInt8.random(in: 1...254))"
        transport = ForwardedForTransport(inner: SocketHTTPTransport(trust: .system), ip: ip)
        let e = Endpoints(config: config)
        self.dir = dir ?? NSTemporaryDirectory() + "castd-it-\(UInt32.random(in: 0...UInt32.max))"
        identity = SenderIdentity(store: CredentialStore(directory: self.dir), auth: AuthClient(endpoints: e, transport: transport),
                                  backend: config.supabaseURL, nowUnix: { Int64(Date().timeIntervalSince1970) + clockSkew })
        api = APIClient(endpoints: e, transport: transport)
        rest = RESTClient(endpoints: e, transport: transport)
    }

    func token() async throws -> Redacted<String> {
        try await identity.signIn(createIfMissing: true)
        return try await identity.accessToken()
    }

    /// A receiver-side row (for tests: castd never sends these).
    func insertAsReceiver(sessionID: String, type: String, payload: JSONValue) async throws {
        let body = try JSONCoding.encode(JSONValue.object([
            "session_id": .string(sessionID), "sender_role": .string("receiver"), "recipient_role": .string("sender"),
            "message_type": .string(type), "payload": payload]))
        let r = try await transport.send(method: "POST", url: try Endpoints(config: config).supabase("/rest/v1/signaling_messages"),
                                         headers: ["apikey": config.supabaseKey, "Authorization": "Bearer \(try await token().unredacted)",
                                                   "Content-Type": "application/json", "Prefer": "return=minimal"],
                                         body: body, timeout: .seconds(10))
        guard r.status == 201 else { throw ServerErrorMapping.postgrest(status: r.status, body: r.body) }
    }
}

/// Collects a subscription's events and lets a test wait for a condition.
final class EventLog: Sendable {
    let events = Mutex<[SignalingSubscription.Event]>([])
    func append(_ e: SignalingSubscription.Event) { events.withLock { $0.append($0.isEmpty ? e : e) } }
    var all: [SignalingSubscription.Event] { events.withLock { $0 } }
    var rowIDs: [String] { all.compactMap { if case .row(let r) = $0 { return r.id }; return nil } }

    func wait(seconds: Double = 15, _ cond: ([SignalingSubscription.Event]) -> Bool) async -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            if cond(all) { return true }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return cond(all)
    }
}

/// A connector whose sockets a test can kill (shutdown without a close frame).
final class KillableConnector: Sendable {
    let fds = Mutex<[Int32]>([])
    var connector: WebSocketClient.Connector {
        { [self] target, timeout in
            let s = try TCPStream.connect(host: target.host, port: target.port, timeout: timeout)
            fds.withLock { $0.append(s.fileDescriptor) }
            return s
        }
    }
    func killAll() { fds.withLock { for fd in $0 { shutdown(fd, Int32(SHUT_RDWR)) }; $0 = [] } }
}

@Suite(.serialized, .enabled(if: Stack.enabled, Stack.skipNote)) struct StackIntegrationTests {
    let config = Stack.config!

    func createSession(_ receiver: Party) async throws -> SessionCreateResponse {
        try await receiver.api.sessionCreate(token: receiver.token())
    }

    func subscribe(_ sender: Party, _ sessionID: String, connector: @escaping WebSocketClient.Connector = WebSocketClient.defaultConnector,
                   vsn: PhoenixEnvelope.Version = .v2) -> (SignalingSubscription, EventLog, Task<Void, Never>) {
        let sub = SignalingSubscription(sessionID: sessionID, config: config, identity: sender.identity, rest: sender.rest,
                                        vsn: vsn, connector: connector)
        let log = EventLog()
        let task = Task {
            async let run: Void = sub.run()
            for await e in sub.events { log.append(e) }
            await run
        }
        return (sub, log, task)
    }

    @Test func pairByPINThenApproveIsObserved() async throws {
        let receiver = Party(config), sender = Party(config)
        let s = try await createSession(receiver)
        let pin = try PairingPIN.normalize(String(s.pin.prefix(3)) + " " + String(s.pin.suffix(3)))
        let paired = try await sender.api.sessionPair(SessionPairRequest(secret: .pin(pin), deviceName: "castd test"), token: sender.token())
        #expect(paired.sessionId == s.sessionId && paired.sessionStatus == .pairing)
        let (sub, log, task) = subscribe(sender, s.sessionId)
        #expect(await log.wait { $0.contains(.subscribed) })
        _ = try await receiver.api.sessionApprove(SessionApproveRequest(sessionId: s.sessionId, approve: true,
                                                                        streamPrefs: StreamPrefs(autoQuality: true, resolution: "1080p", frameRate: 30)),
                                                  token: receiver.token())
        #expect(await log.wait { $0.contains(.status(.connecting)) && $0.contains { if case .row = $0 { return true }; return false } })
        let rows = log.all.compactMap { if case .row(let r) = $0 { return r }; return nil }
        #expect(rows.count == 1)
        if case .joinApproved(let exp, let prefs)? = rows.first.map(SignalingMessage.init(row:)) {
            #expect(exp != nil && prefs == StreamPrefs(autoQuality: true, resolution: "1080p", frameRate: 30))
        } else { Issue.record("not join_approved: \(rows)") }
        // castd can now signal: an offer goes in with return=minimal.
        try await sender.rest.insert(OutgoingSignalingRow(sessionID: s.sessionId, message: .offer(sdp: "v=0\r\n", negotiationID: UUID().uuidString.lowercased())),
                                     token: sender.token())
        // Over 64 KB → SQLSTATE 54000 read from the body.
        do {
            try await sender.rest.insert(OutgoingSignalingRow(sessionID: s.sessionId, message: .offer(sdp: String(repeating: "a", count: 70_000), negotiationID: "n")),
                                         token: sender.token())
            Issue.record("oversized insert accepted")
        } catch let e as ServerError { #expect(e.code == .payloadTooLarge) }
        let up = try await sender.api.sessionUpdate(sessionID: s.sessionId, action: .connected, token: sender.token())
        #expect(up.sessionStatus == .connected)
        let ice = try await sender.api.iceConfig(token: sender.token())
        #expect(!ice.iceServers.isEmpty)
        sub.stop()
        await task.value
    }

    @Test func pairByQRURLThenDenyIsObserved() async throws {
        let receiver = Party(config), sender = Party(config)
        let s = try await createSession(receiver)
        let url = try PairingURL(parsing: s.qrUrl)
        #expect(url.sessionID == s.sessionId)
        let (sub, log, task) = subscribe(sender, s.sessionId, vsn: .v1)
        let paired = try await sender.api.sessionPair(SessionPairRequest(secret: .qr(url), deviceName: nil), token: sender.token())
        #expect(paired.sessionStatus == .pairing)
        #expect(await log.wait { $0.contains(.subscribed) })
        _ = try await receiver.api.sessionApprove(SessionApproveRequest(sessionId: s.sessionId, approve: false), token: receiver.token())
        #expect(await log.wait { $0.contains(.status(.expired)) && log.rowIDs.count == 1 })
        let rows = log.all.compactMap { if case .row(let r) = $0 { return SignalingMessage(row: r) }; return nil }
        #expect(rows == [.disconnect(.denied)])
        sub.stop()
        await task.value
    }

    @Test func wrongPINIsClearAndTheSixthFailureIsRateLimitedWithAWait() async throws {
        let receiver = Party(config), sender = Party(config)
        let s = try await createSession(receiver)
        let wrong = try PairingPIN.normalize(String(format: "%06d", (Int(s.pin)! + 1) % 1_000_000))
        var codes: [CastError.Code] = []
        var last: ServerError?
        for _ in 0..<6 {
            do { _ = try await sender.api.sessionPair(SessionPairRequest(secret: .pin(wrong), deviceName: nil), token: sender.token()) } catch let e as ServerError {
                codes.append(e.code); last = e
            }
        }
        #expect(codes == [.invalidCode, .invalidCode, .invalidCode, .invalidCode, .invalidCode, .rateLimited])
        #expect((last?.retryAfterSeconds ?? 0) > 0)
        #expect(last?.message.contains("try again in") == true)
        #expect(!(last?.message.contains(wrong.unredacted) ?? true))
    }

    @Test func killedRealtimeSocketLosesNoRow() async throws {
        let receiver = Party(config), sender = Party(config)
        let s = try await createSession(receiver)
        _ = try await sender.api.sessionPair(SessionPairRequest(secret: .pin(Redacted(s.pin)), deviceName: nil), token: sender.token())
        _ = try await receiver.api.sessionApprove(SessionApproveRequest(sessionId: s.sessionId, approve: true), token: receiver.token())
        let killer = KillableConnector()
        let (sub, log, task) = subscribe(sender, s.sessionId, connector: killer.connector)
        #expect(await log.wait { $0.contains(.subscribed) })
        func cand(_ i: Int) -> JSONValue { .object(["negotiationId": .string("n"), "candidate": .string("candidate:\(i) 1 udp 1 127.0.0.1 \(5000 + i) typ host")]) }
        for i in 0..<5 { try await receiver.insertAsReceiver(sessionID: s.sessionId, type: "ice_candidate", payload: cand(i)) }
        #expect(await log.wait { _ in log.rowIDs.count == 6 })   // join_approved + 5
        killer.killAll()
        // Rows inserted while the socket is down arrive through the backfill after reconnecting.
        for i in 5..<10 { try await receiver.insertAsReceiver(sessionID: s.sessionId, type: "ice_candidate", payload: cand(i)) }
        #expect(await log.wait(seconds: 20) { _ in log.rowIDs.count >= 11 })
        for i in 10..<12 { try await receiver.insertAsReceiver(sessionID: s.sessionId, type: "ice_candidate", payload: cand(i)) }
        #expect(await log.wait { _ in log.rowIDs.count >= 13 })
        try? await Task.sleep(for: .milliseconds(500))
        let ids = log.rowIDs
        #expect(ids.count == 13 && Set(ids).count == 13)
        #expect(log.all.contains { if case .interrupted = $0 { return true }; return false })
        let candidates = log.all.compactMap { e -> Int? in
            if case .row(let r) = e, case .iceCandidate(let c) = SignalingMessage(row: r) { return Int(c.candidate.split(separator: " ")[0].dropFirst(10)) }
            return nil
        }
        #expect(candidates == Array(0..<12))
        // Nothing the subscription reported carries a secret.
        let stored = try #require(try CredentialStore(directory: sender.dir).load(backend: config.supabaseURL))
        let everything = log.all.map { String(describing: $0) }.joined(separator: "\n")
        for secret in [stored.accessToken, stored.refreshToken, s.pin] { #expect(!everything.contains(secret)) }
        sub.stop()
        await task.value
    }

    @Test func twoProcessesRefreshingAtOnceNeverTripReuse() async throws {
        let first = Party(config)
        _ = try await first.token()
        // Two more "processes" on the same identity, with clocks moved so that
        // the current token is due for refresh (60 s left) but a new one is not.
        let stored = try #require(try CredentialStore(directory: first.dir).load(backend: config.supabaseURL))
        let skew = stored.expiresAt - Int64(Date().timeIntervalSince1970) - 60
        let a = Party(config, dir: first.dir, clockSkew: skew)
        let b = Party(config, dir: first.dir, clockSkew: skew)
        try await a.identity.signIn(createIfMissing: false)
        try await b.identity.signIn(createIfMissing: false)
        async let ra = a.identity.tick()
        async let rb = b.identity.tick()
        let (ta, tb) = try await (ra, rb)
        // One refreshed, the other took the rotated pair from the file: same tokens, no reuse error.
        #expect(ta != nil && ta?.refreshToken == tb?.refreshToken)
        #expect(ta?.refreshToken.unredacted != stored.refreshToken)
        let userA = await a.identity.userID
        #expect(userA == stored.userID)
        _ = try await a.api.iceConfig(token: ta!.accessToken)
        // The first process still holds the old pair: its forced refresh takes the new one from the file.
        let c = try await first.identity.refresh(force: true)
        #expect(c.refreshToken == ta?.refreshToken)
    }

}

/// The long refresh run in a suite of its own: it spends most of its minute waiting, with parties
/// of its own, so it runs beside the serialized suite rather than after it (Scripts/test's Swift step
/// was the serialized suite's 40 s followed by this test's 70).
@Suite(.enabled(if: Stack.enabled, Stack.skipNote)) struct StackRefreshTests {
    let config = Stack.config!
    let stack = StackIntegrationTests()

    /// Issue 3: with a 60 s token lifetime (`devstack up --access-token-ttl 60`)
    /// a long subscription keeps receiving rows through several refreshes.
    /// Runs for CASTD_TEST_REFRESH_SECONDS (Scripts/test: 70, past the first token's expiry; 300 for the
    /// issue's 5 minutes); skipped when unset.
    @Test(.enabled(if: Stack.env["CASTD_TEST_REFRESH_SECONDS"] != nil, "set CASTD_TEST_REFRESH_SECONDS=300 to run"))
    func longSubscriptionSurvivesTokenRefreshes() async throws {
        let seconds = Int(Stack.env["CASTD_TEST_REFRESH_SECONDS"]!) ?? 300
        let receiver = Party(config), sender = Party(config)
        let s = try await stack.createSession(receiver)
        _ = try await sender.api.sessionPair(SessionPairRequest(secret: .pin(Redacted(s.pin)), deviceName: nil), token: sender.token())
        _ = try await receiver.api.sessionApprove(SessionApproveRequest(sessionId: s.sessionId, approve: true), token: receiver.token())
        let first = try #require(try CredentialStore(directory: sender.dir).load(backend: config.supabaseURL))
        let (sub, log, task) = stack.subscribe(sender, s.sessionId)
        #expect(await log.wait { $0.contains(.subscribed) })
        var refreshTokens: Set<String> = [first.refreshToken]
        var sent = 0
        let start = Date()
        while Date().timeIntervalSince(start) < Double(seconds) {
            try await receiver.insertAsReceiver(sessionID: s.sessionId, type: "ice_candidate",
                                                payload: .object(["negotiationId": .string("n"), "candidate": .string("candidate:\(sent) 1 udp 1 127.0.0.1 9 typ host")]))
            sent += 1
            try await Task.sleep(for: .seconds(10))
            if let r = try CredentialStore(directory: sender.dir).load(backend: config.supabaseURL) { refreshTokens.insert(r.refreshToken) }
        }
        #expect(await log.wait { _ in log.rowIDs.count == sent + 1 })
        let ids = log.rowIDs
        #expect(ids.count == sent + 1 && Set(ids).count == ids.count)
        // The token was refreshed on the way (with a 60 s lifetime, under the 90 s tick margin, on
        // every 30 s tick: at least one rotation a lifetime, besides the first pair), and the
        // channel never lost its subscription: the access_token pushes kept it alive past the
        // first token's expiry.
        #expect(refreshTokens.count >= 1 + seconds / 60)
        let interruptions = log.all.filter { if case .interrupted = $0 { return true }; return false }
        #expect(interruptions.isEmpty, "\(interruptions)")
        sub.stop()
        await task.value
    }
}
