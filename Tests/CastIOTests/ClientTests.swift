import CastCore
import Foundation
import Synchronization
import SignalingTestSupport
import Testing
@testable import CastIO
@testable import CastSignaling

@Suite struct ClientTests {
    @Test func restInsertUsesReturnMinimalAndExactBody() async throws {
        let fake = FakeTransport { _ in FakeTransport.json(201, "") }
        let rest = RESTClient(endpoints: Endpoints(config: testConfig), transport: fake)
        try await rest.insert(OutgoingSignalingRow(sessionID: "s1", message: .disconnect(.senderEnded)), token: Redacted("jwt"))
        let r = try #require(fake.requests.first)
        #expect(r.method == "POST" && r.url.absoluteString == "http://127.0.0.1:9/rest/v1/signaling_messages")
        #expect(r.headers["Prefer"] == "return=minimal" && r.headers["apikey"] == "pk-test" && r.headers["Authorization"] == "Bearer jwt")
        #expect(r.bodyText == #"{"message_type":"disconnect","payload":{"reason":"sender_ended"},"recipient_role":"receiver","sender_role":"sender","session_id":"s1"}"#)
    }

    @Test func restBackfillUsesTheSpecSelectAndSkipsBadRows() async throws {
        let sid = "7f0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b"
        let fake = FakeTransport { _ in FakeTransport.json(200, #"[{"id":"a","session_id":"\#(sid)","recipient_role":"sender","message_type":"answer","payload":{},"created_at":"t"},{"bogus":1}]"#) }
        let rest = RESTClient(endpoints: Endpoints(config: testConfig), transport: fake)
        let rows = try await rest.backfill(sessionID: sid.uppercased(), token: Redacted("jwt"))
        #expect(rows.map(\.id) == ["a"])
        #expect(fake.requests[0].url.absoluteString ==
            "http://127.0.0.1:9/rest/v1/signaling_messages?session_id=eq.\(sid)&recipient_role=eq.sender&order=created_at.asc")
        await #expect(throws: CastError.self) { _ = try await rest.backfill(sessionID: "x&select=secret", token: Redacted("jwt")) }
    }

    @Test func restInsertErrorsReadTheSQLState() async {
        let fake = FakeTransport { _ in FakeTransport.json(500, #"{"code":"P0429","message":"too many","details":null,"hint":null}"#) }
        let rest = RESTClient(endpoints: Endpoints(config: testConfig), transport: fake)
        do {
            try await rest.insert(OutgoingSignalingRow(sessionID: "s1", message: .disconnect(.failed)), token: Redacted("jwt"))
            Issue.record("no error")
        } catch let e as ServerError { #expect(e.code == .tooManyRows && e.status == 500) } catch { Issue.record("\(error)") }
    }

    @Test func apiPairMapsRateLimitWithWait() async {
        let fake = FakeTransport { _ in FakeTransport.json(429, #"{"error":{"code":"rate_limited","message":"slow down"}}"#, headers: ["retry-after": "42"]) }
        let api = APIClient(endpoints: Endpoints(config: testConfig), transport: fake)
        do {
            _ = try await api.sessionPair(SessionPairRequest(secret: .pin(Redacted("482913")), deviceName: "d"), token: Redacted("jwt-secret"))
            Issue.record("no error")
        } catch let e as ServerError {
            #expect(e.code == .rateLimited && e.retryAfterSeconds == 42 && e.message.contains("42 s"))
            #expect(!e.message.contains("482913") && !e.message.contains("jwt-secret"))
        } catch { Issue.record("\(error)") }
        let r = fake.requests[0]
        #expect(r.url.absoluteString == "http://127.0.0.1:9/api/public/session-pair" && r.headers["Authorization"] == "Bearer jwt-secret")
        #expect(r.bodyText == #"{"deviceName":"d","pin":"482913"}"#)
    }

    @Test func apiDecodesSuccessShapes() async throws {
        let fake = FakeTransport { r in
            switch r.url.lastPathComponent {
            case "ice-config": return FakeTransport.json(200, #"{"iceServers":[{"urls":["stun:127.0.0.1:3478"]}],"turnConfigured":false}"#)
            case "session-update": return FakeTransport.json(200, #"{"sessionId":"s","status":"connected","senderAuthExpiresAt":"2026-10-20T12:40:00Z"}"#)
            default: return FakeTransport.json(404, #"{"error":{"code":"not_found","message":"x"}}"#)
            }
        }
        let api = APIClient(endpoints: Endpoints(config: testConfig), transport: fake)
        let ice = try await api.iceConfig(token: Redacted("t"))
        #expect(ice.iceServers.first?.urls == ["stun:127.0.0.1:3478"] && fake.requests[0].method == "GET")
        let up = try await api.sessionUpdate(sessionID: "s", action: .connected, token: Redacted("t"))
        #expect(up.sessionStatus == .connected && fake.requests[1].bodyText == #"{"action":"connected","sessionId":"s"}"#)
        await #expect(throws: ServerError.self) { _ = try await api.sessionEnd(sessionID: "s", token: Redacted("t")) }
    }

    @Test func authRetriesServerErrorsThenSucceeds() async throws {
        let count = Mutex(0)
        let fake = FakeTransport { _ in
            let n = count.withLock { $0 += 1; return $0 }
            return n < 3 ? FakeTransport.json(503, "") : FakeTransport.json(200, sessionBody(access: makeJWT(exp: 9999), refresh: "rt-2"))
        }
        let slept = Mutex<[Duration]>([])
        var auth = AuthClient(endpoints: Endpoints(config: testConfig), transport: fake)
        auth.sleep = { d in slept.withLock { $0.append(d) } }
        let t = try await auth.refresh(Redacted("rt-1"))
        #expect(t.refreshToken.unredacted == "rt-2" && t.expiresAt == 9999)
        #expect(slept.withLock { $0 } == [.milliseconds(200), .milliseconds(400)])
        let r = fake.requests[0]
        #expect(r.url.absoluteString == "http://127.0.0.1:9/auth/v1/token?grant_type=refresh_token")
        #expect(r.bodyText == #"{"refresh_token":"rt-1"}"# && r.headers["X-Supabase-Api-Version"] == "2024-01-01")
    }

    @Test func authDoesNotRetryADeadSession() async {
        let fake = FakeTransport { _ in FakeTransport.json(400, #"{"code":"refresh_token_already_used","message":"Invalid Refresh Token: Already Used"}"#) }
        var auth = AuthClient(endpoints: Endpoints(config: testConfig), transport: fake)
        auth.sleep = { _ in Issue.record("slept") }
        do { _ = try await auth.refresh(Redacted("rt-1")); Issue.record("no error") } catch let e as ServerError {
            #expect(e.code == .sessionDead && fake.requests.count == 1)
        } catch { Issue.record("\(error)") }
    }
}

/// A fake GoTrue that rotates refresh tokens and, like the real one, treats
/// reuse of a rotated token as fatal.
final class RotatingAuthServer: Sendable {
    struct State { var valid = "rt-0"; var generation = 0; var refreshes = 0; var reuse = 0 }
    let state = Mutex(State())
    let exp: Int64

    init(exp: Int64) { self.exp = exp }

    func handle(_ r: FakeTransport.Request) -> HTTPResponse {
        if r.url.path.hasSuffix("/signup") {
            return FakeTransport.json(200, sessionBody(access: makeJWT(exp: exp, extra: #","g":0"#), refresh: "rt-0"))
        }
        let sent = (try? JSONCoding.decode([String: String].self, from: r.body ?? []))?["refresh_token"] ?? ""
        return state.withLock { s in
            guard sent == s.valid else {
                s.reuse += 1
                return FakeTransport.json(400, #"{"code":"refresh_token_already_used","message":"Already Used"}"#)
            }
            s.generation += 1
            s.refreshes += 1
            s.valid = "rt-\(s.generation)"
            return FakeTransport.json(200, sessionBody(access: makeJWT(exp: exp + Int64(s.generation) * 3600, extra: #","g":\#(s.generation)"#), refresh: s.valid))
        }
    }
}

@Suite struct CredentialStoreTests {
    func tempDir() -> String {
        let d = NSTemporaryDirectory() + "castd-cred-\(UInt32.random(in: 0...UInt32.max))/state/castd"
        return d
    }

    func mode(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path)[.posixPermissions]) as? Int) ?? -1
    }

    @Test func defaultDirectoryFollowsXDG() throws {
        #expect(try CredentialStore.defaultDirectory(environment: ["XDG_STATE_HOME": "/x/state", "HOME": "/home/a"]) == "/x/state/castd")
        #expect(try CredentialStore.defaultDirectory(environment: ["XDG_STATE_HOME": "relative", "HOME": "/home/a"]) == "/home/a/.local/state/castd")
        #expect(try CredentialStore.defaultDirectory(environment: ["HOME": "/home/a"]) == "/home/a/.local/state/castd")
        #expect(throws: CastError.self) { try CredentialStore.defaultDirectory(environment: [:]) }
    }

    @Test func savesPrivatelyAndAtomically() throws {
        let store = CredentialStore(directory: tempDir())
        let t = AuthTokens(accessToken: Redacted("at"), refreshToken: Redacted("rt"), userID: "u", expiresAt: 42)
        try store.save(.init(backend: "http://b", tokens: t))
        #expect(mode(store.directory) == 0o700 && mode(store.file) == 0o600)
        #expect(try store.load(backend: "http://b")?.tokens == t)
        #expect(try store.load(backend: "http://other") == nil)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: store.directory).filter { $0.hasSuffix(".tmp") }
        #expect(leftovers.isEmpty)
        // A wide directory is tightened.
        chmod(store.directory, 0o755)
        try store.save(.init(backend: "http://b", tokens: t))
        #expect(mode(store.directory) == 0o700)
        try "{broken".write(toFile: store.file, atomically: false, encoding: .utf8)
        #expect(throws: CastError.self) { try store.load(backend: "http://b") }
    }

    @Test func twoProcessesRefreshingAtOnceNeverReuseARefreshToken() async throws {
        let dir = tempDir()
        let server = RotatingAuthServer(exp: 1000)
        let fake = FakeTransport { server.handle($0) }
        let auth = AuthClient(endpoints: Endpoints(config: testConfig), transport: fake)
        // Two "processes": separate identities over the same directory, same clock at 950 (50 s left).
        let a = SenderIdentity(store: CredentialStore(directory: dir), auth: auth, backend: "b", nowUnix: { 950 })
        let b = SenderIdentity(store: CredentialStore(directory: dir), auth: auth, backend: "b", nowUnix: { 950 })
        try await a.signIn(createIfMissing: true)
        try await b.signIn(createIfMissing: false)
        async let ra = a.tick()
        async let rb = b.tick()
        let (ta, tb) = try await (ra, rb)
        let s = server.state.withLock { $0 }
        #expect(s.refreshes == 1 && s.reuse == 0)
        #expect(ta?.refreshToken.unredacted == "rt-1" && tb?.refreshToken.unredacted == "rt-1")
        #expect(try CredentialStore(directory: dir).load(backend: "b")?.refreshToken == "rt-1")
        // Fresh now: the next tick does nothing.
        #expect(try await a.tick() == nil)
    }

    @Test func firstRunsAtOnceCreateOneIdentity() async throws {
        let dir = tempDir()
        let server = RotatingAuthServer(exp: 10_000)
        let fake = FakeTransport { server.handle($0) }
        let auth = AuthClient(endpoints: Endpoints(config: testConfig), transport: fake)
        let ids = (0..<4).map { _ in SenderIdentity(store: CredentialStore(directory: dir), auth: auth, backend: "b", nowUnix: { 0 }) }
        try await withThrowingTaskGroup(of: Void.self) { g in
            for i in ids { g.addTask { try await i.signIn(createIfMissing: true) } }
            try await g.waitForAll()
        }
        #expect(fake.requests.filter { $0.url.path.hasSuffix("/signup") }.count == 1)
    }

    @Test func accessTokenRefreshesWhenUnder30sLeft() async throws {
        let dir = tempDir()
        let server = RotatingAuthServer(exp: 1000)
        let fake = FakeTransport { server.handle($0) }
        let auth = AuthClient(endpoints: Endpoints(config: testConfig), transport: fake)
        let now = Mutex<Int64>(900)
        let id = SenderIdentity(store: CredentialStore(directory: dir), auth: auth, backend: "b", nowUnix: { now.withLock { $0 } })
        let first = try await id.signIn(createIfMissing: true)
        #expect(try await id.accessToken() == first.accessToken)      // 100 s left: no refresh before a call
        now.withLock { $0 = 971 }
        let second = try await id.accessToken()                          // 29 s left: refresh first
        #expect(second != first.accessToken && server.state.withLock { $0.refreshes } == 1)
    }
}

@Suite struct WithTokenTests {
    @Test func a401RefreshesOnceAndRetries() async throws {
        let dir = NSTemporaryDirectory() + "castd-wt-\(UInt32.random(in: 0...UInt32.max))"
        let server = RotatingAuthServer(exp: 10_000)
        let auth = AuthClient(endpoints: Endpoints(config: testConfig), transport: FakeTransport { server.handle($0) })
        let id = SenderIdentity(store: CredentialStore(directory: dir), auth: auth, backend: "b", nowUnix: { 0 })
        let first = try await id.signIn(createIfMissing: true)
        let api = FakeTransport { r in
            // The API accepts only a token minted by a refresh (g ≥ 1 in the claims).
            let bearer = r.headers["Authorization"] ?? ""
            return bearer == "Bearer \(first.accessToken.unredacted)"
                ? FakeTransport.json(401, #"{"error":{"code":"unauthorized","message":"expired"}}"#)
                : FakeTransport.json(200, #"{"iceServers":[],"turnConfigured":false}"#)
        }
        let client = APIClient(endpoints: Endpoints(config: testConfig), transport: api)
        let ice = try await id.withToken { try await client.iceConfig(token: $0) }
        #expect(ice == IceConfig(iceServers: [], turnConfigured: false))
        #expect(api.requests.count == 2 && server.state.withLock { $0.refreshes } == 1)
        // Other errors are not retried.
        let failing = APIClient(endpoints: Endpoints(config: testConfig), transport: FakeTransport { _ in FakeTransport.json(409, "{}") })
        await #expect(throws: ServerError.self) { _ = try await id.withToken { try await failing.iceConfig(token: $0) } }
        #expect(server.state.withLock { $0.refreshes } == 1)
    }
}
