import CastCore
import SignalingTestSupport
import Testing
@testable import CastSignaling

@Suite struct WireModelTests {
    @Test func rowDecodingIsTolerant() throws {
        let text = #"{"id":"r1","session_id":"s1","sender_role":"receiver","recipient_role":"sender","message_type":"join_approved","payload":{"senderAuthExpiresAt":"2026-10-20T12:40:00.000Z","streamPrefs":{"autoQuality":true,"resolution":"1080p","frameRate":60,"hdr":true},"new":1},"created_at":"2026-10-20T12:39:00+00:00","future_column":[1,2]}"#
        let r = try JSONCoding.decode(SignalingRow.self, from: Array(text.utf8))
        #expect(r.isForSender)
        #expect(SignalingMessage(row: r) == .joinApproved(senderAuthExpiresAt: "2026-10-20T12:40:00.000Z",
                                                          streamPrefs: StreamPrefs(autoQuality: true, resolution: "1080p", frameRate: 60)))
        let bare = try JSONCoding.decode(SignalingRow.self, from: Array(#"{"id":"r2","session_id":"s1","payload":null}"#.utf8))
        #expect(bare.payload == .object([:]) && !bare.isForSender)
    }

    @Test func everyMessageTypeParses() {
        func m(_ type: String, _ json: String) -> SignalingMessage {
            SignalingMessage(type: type, payload: try! JSONCoding.decode(JSONValue.self, from: Array(json.utf8)))
        }
        #expect(m("join_request", #"{"deviceName":"Jane's PC"}"#) == .joinRequest(deviceName: "Jane's PC"))
        #expect(m("answer", #"{"type":"answer","sdp":"v=0\r\n","negotiationId":"n1"}"#) == .answer(sdp: "v=0\r\n", negotiationID: "n1"))
        #expect(m("offer", #"{"type":"offer","sdp":"v=0","negotiationId":"n1"}"#) == .offer(sdp: "v=0", negotiationID: "n1"))
        #expect(m("ice_candidate", #"{"negotiationId":"n1","candidate":"candidate:1 1 udp 2122260223 abc.local 5000 typ host","sdpMid":"0","sdpMLineIndex":0,"usernameFragment":"uf"}"#)
            == .iceCandidate(IceCandidatePayload(negotiationID: "n1", candidate: "candidate:1 1 udp 2122260223 abc.local 5000 typ host",
                                                 sdpMid: "0", sdpMLineIndex: 0, usernameFragment: "uf")))
        #expect(m("ice_candidate", #"{"negotiationId":"n1","endOfCandidates":true}"#) == .endOfCandidates(negotiationID: "n1"))
        #expect(m("ice_candidate", #"{"negotiationId":"n1","candidate":""}"#) == .endOfCandidates(negotiationID: "n1"))
        #expect(m("disconnect", #"{"reason":"denied"}"#) == .disconnect(.denied))
        #expect(m("disconnect", #"{"reason":"receiver_ended"}"#) == .disconnect(.receiverEnded))
        #expect(m("disconnect", #"{"reason":"cosmic rays"}"#) == .disconnect(.other("cosmic rays")))
        #expect(m("hologram", #"{}"#) == .unknown(type: "hologram"))
        #expect(m("answer", #"{"negotiationId":"n1"}"#) == .invalid(type: "answer", why: "no sdp"))
        #expect(m("ice_candidate", #"{"candidate":"x"}"#) == .invalid(type: "ice_candidate", why: "no negotiationId"))
        #expect(m("disconnect", #"[]"#) == .invalid(type: "disconnect", why: "no reason"))
    }

    @Test func outgoingRowsEncodeExactly() throws {
        let offer = OutgoingSignalingRow(sessionID: "s1", message: .offer(sdp: "v=0\r\n", negotiationID: "n1"))
        #expect(try JSONCoding.encodeString(offer) ==
            #"{"message_type":"offer","payload":{"negotiationId":"n1","sdp":"v=0\r\n","type":"offer"},"recipient_role":"receiver","sender_role":"sender","session_id":"s1"}"#)
        let cand = OutgoingSignalingRow(sessionID: "s1", message: .iceCandidate(IceCandidatePayload(negotiationID: "n1", candidate: "candidate:x", usernameFragment: "u")))
        #expect(try JSONCoding.encodeString(cand.payload) == #"{"candidate":"candidate:x","negotiationId":"n1","sdpMLineIndex":0,"sdpMid":"0","usernameFragment":"u"}"#)
        #expect(try JSONCoding.encodeString(OutgoingSignal.endOfCandidates(negotiationID: "n1").payload) == #"{"endOfCandidates":true,"negotiationId":"n1"}"#)
        #expect(try JSONCoding.encodeString(OutgoingSignal.disconnect(.senderEnded).payload) == #"{"reason":"sender_ended"}"#)
    }

    @Test func pairRequestsEncodeExactly() throws {
        let pin = SessionPairRequest(secret: .pin(try PairingPIN.normalize("482 913")), deviceName: "castd on box")
        #expect(try JSONCoding.encodeString(pin) == #"{"deviceName":"castd on box","pin":"482913"}"#)
        let url = try PairingURL(parsing: "https://x.example/pair?t=\(PairingURLTests.token)&s=\(PairingURLTests.sid)")
        let qr = SessionPairRequest(secret: .qr(url), deviceName: nil)
        #expect(try JSONCoding.encodeString(qr) == #"{"sessionId":"\#(PairingURLTests.sid)","token":"\#(PairingURLTests.token)"}"#)
        #expect(SessionPairRequest.clampDeviceName(String(repeating: "é", count: 90)).count == 80)
        #expect(!"\(pin)".contains("482913"))
    }

    @Test func iceConfigAcceptsStringOrListAndHidesCredential() throws {
        let text = #"{"iceServers":[{"urls":["stun:a:19302","stun:b:19302"]},{"urls":"turn:t:3478","username":"u","credential":"secret-cred"}],"turnConfigured":true,"x":1}"#
        let c = try JSONCoding.decode(IceConfig.self, from: Array(text.utf8))
        #expect(c.turnConfigured && c.iceServers.count == 2)
        #expect(c.iceServers[0].urls == ["stun:a:19302", "stun:b:19302"])
        #expect(c.iceServers[1].urls == ["turn:t:3478"] && c.iceServers[1].credential?.unredacted == "secret-cred")
        #expect(!"\(c)".contains("secret-cred"))
        #expect(try JSONCoding.decode(IceConfig.self, from: Array("{}".utf8)) == IceConfig(iceServers: [], turnConfigured: false))
    }

    @Test func sessionStatuses() {
        #expect(["waiting", "pairing", "connecting", "connected", "disconnected", "expired"].map { SessionStatus(raw: $0).raw }
            == ["waiting", "pairing", "connecting", "connected", "disconnected", "expired"])
        #expect(SessionStatus(raw: "paused") == .other("paused"))
        #expect(SessionStatus.expired.isFinal && !SessionStatus.connected.isFinal)
    }
}

@Suite struct ServerErrorTests {
    @Test func apiErrorsMapByStatusAndCode() {
        func e(_ status: Int, _ body: String, retry: String? = nil) -> ServerError {
            ServerErrorMapping.api(status: status, body: Array(body.utf8), retryAfter: retry, endpoint: "session-pair")
        }
        let rl = e(429, #"{"error":{"code":"rate_limited","message":"Too many attempts"}}"#, retry: "540")
        #expect(rl.code == .rateLimited && rl.retryAfterSeconds == 540 && rl.message == "Too many pairing attempts; try again in 9 min.")
        #expect(e(429, "", retry: "75").message == "Too many pairing attempts; try again in 1 min 15 s.")
        #expect(e(429, "", retry: "Wed, 21 Oct 2026 07:28:00 GMT").retryAfterSeconds == nil)
        let ic = e(400, #"{"error":{"code":"invalid_code","message":"Invalid or expired pairing code"}}"#)
        #expect(ic.code == .invalidCode && ic.serverCode == "invalid_code" && ic.status == 400)
        #expect(ic.message.hasSuffix("Server says: Invalid or expired pairing code"))
        #expect(e(400, #"{"error":{"code":"invalid_request","message":"bad"}}"#).code == .invalidRequest)
        #expect(e(401, #"{"error":{"code":"unauthorized","message":"no"}}"#).code == .unauthorized)
        #expect(e(404, #"{"error":{"code":"not_found","message":"no"}}"#).code == .notFound)
        #expect(e(409, #"{"error":{"code":"invalid_state","message":"ended"}}"#).code == .invalidState)
        #expect(e(500, "<html>").code == .serverError)
        #expect(e(418, "").code == .httpStatus)
    }

    @Test func postgrestErrorsMapBySQLStateNotStatus() {
        func e(_ status: Int, _ body: String) -> ServerError { ServerErrorMapping.postgrest(status: status, body: Array(body.utf8)) }
        #expect(e(500, #"{"code":"54000","message":"payload too large","details":null,"hint":null}"#).code == .payloadTooLarge)
        #expect(e(500, #"{"code":"P0429","message":"rate","details":null,"hint":null}"#).code == .tooManyRows)
        #expect(e(403, #"{"code":"42501","message":"new row violates row-level security policy"}"#).code == .forbidden)
        #expect(e(401, #"{"code":"PGRST303","message":"JWT expired"}"#).code == .unauthorized)
        #expect(e(500, #"{"code":"XX000","message":"boom"}"#).code == .serverError)
        #expect(e(400, #"{"code":"22P02","message":"bad uuid"}"#).serverCode == "22P02")
    }

    @Test func fourDeadSessionCodesBecomeOnePairAgainError() {
        for c in ["refresh_token_already_used", "refresh_token_not_found", "session_expired", "session_not_found"] {
            let new = ServerErrorMapping.auth(status: 400, body: Array(#"{"code":"\#(c)","message":"Invalid Refresh Token"}"#.utf8))
            #expect(new.code == .sessionDead && new.message.contains("pair again"))
            let old = ServerErrorMapping.auth(status: 400, body: Array(#"{"code":400,"error_code":"\#(c)","msg":"x"}"#.utf8))
            #expect(old.code == .sessionDead && old.serverCode == c)
        }
        #expect(ServerErrorMapping.auth(status: 422, body: Array(#"{"code":"anonymous_provider_disabled","message":"off"}"#.utf8)).code == .authFailed)
        let e503 = ServerErrorMapping.auth(status: 503, body: [])
        #expect(e503.code == .serverError && e503.isRetryable)
    }
}

@Suite struct AuthLogicTests {
    @Test func jwtExpIsDecodedWithoutVerifying() throws {
        let c = try JWTClaims(makeJWT(exp: 1_700_003_600, sub: "abc"))
        #expect(c.exp == 1_700_003_600 && c.sub == "abc")
        #expect(throws: CastError.self) { try JWTClaims("a.b") }
        #expect(throws: CastError.self) { try JWTClaims("a.!!!.c") }
        #expect(throws: CastError.self) { try JWTClaims("a.\(Base64URL.encode(Array(#"{"sub":"x"}"#.utf8))).c") }
        let e = #expect(throws: CastError.self) { try JWTClaims("secret-token-value") }
        #expect(e != nil && e?.message.contains("secret-token-value") == false)
    }

    @Test func refreshTimingMatchesTheOfficialClients() {
        let exp: Int64 = 10_000
        #expect(!RefreshPolicy.refreshOnTick(expiresAt: exp, nowUnix: exp - 90))
        #expect(RefreshPolicy.refreshOnTick(expiresAt: exp, nowUnix: exp - 89))
        #expect(!RefreshPolicy.refreshBeforeCall(expiresAt: exp, nowUnix: exp - 30))
        #expect(RefreshPolicy.refreshBeforeCall(expiresAt: exp, nowUnix: exp - 29))
        #expect(RefreshPolicy.refreshBeforeCall(expiresAt: exp, nowUnix: exp + 5))
        #expect(RefreshPolicy.tickInterval == .seconds(30))
    }

    @Test func retryBacksOffFrom200msAndStopsBefore30s() {
        var delays: [Duration] = []
        var elapsed: Duration = .zero
        var n = 1
        while let d = RetryPolicy.delay(afterAttempt: n, elapsed: elapsed) {
            delays.append(d)
            elapsed += d
            n += 1
        }
        #expect(delays == [200, 400, 800, 1600, 3200, 6400, 12800].map { .milliseconds($0) })
        #expect(elapsed == .milliseconds(25400))
        #expect(RetryPolicy.delay(afterAttempt: 1, elapsed: .milliseconds(29_800)) == nil)
        #expect(RetryPolicy.delay(afterAttempt: 1, elapsed: .milliseconds(29_799)) == .milliseconds(200))
    }

    @Test func authTokensPreferTheJWTExp() throws {
        let jwt = makeJWT(exp: 5000)
        let t = try AuthTokens.decode(body: Array(sessionBody(access: jwt, refresh: "rt-1", expiresAt: 4000).utf8), nowUnix: 0)
        #expect(t.expiresAt == 5000 && t.userID == "u-1" && t.refreshToken.unredacted == "rt-1")
        let opaque = try AuthTokens.decode(body: Array(#"{"access_token":"opaque","refresh_token":"r","expires_in":60,"user":{"id":"u"}}"#.utf8), nowUnix: 100)
        #expect(opaque.expiresAt == 160)
        #expect(!"\(t)".contains(jwt) && !"\(t)".contains("rt-1"))
    }

    /// Issue 17: `nowUnix + expires_in` and `expiresAt - nowUnix` overflowed (a trap) on
    /// values a server or a stored file may hold.
    @Test func extremeExpiriesSaturateInsteadOfTrapping() throws {
        let now: Int64 = 1_792_500_000
        let body = #"{"access_token":"opaque","refresh_token":"r","expires_in":9223372036854775807,"user":{"id":"u"}}"#
        let t = try AuthTokens.decode(body: Array(body.utf8), nowUnix: now)
        #expect(t.expiresAt == .max)
        #expect(!RefreshPolicy.refreshOnTick(expiresAt: .max, nowUnix: now))
        #expect(RefreshPolicy.refreshOnTick(expiresAt: .min, nowUnix: now))
        #expect(RefreshPolicy.refreshBeforeCall(expiresAt: .min, nowUnix: now))
        #expect(!RefreshPolicy.refreshBeforeCall(expiresAt: 0, nowUnix: .min))
        #expect(RefreshPolicy.isFresh(expiresAt: .max, nowUnix: .min))
    }
}

@Suite struct DeviceNameTests {
    @Test func deviceNameUsesPrettyHostname() {
        #expect(DeviceName.default(machineInfo: "CHASSIS=laptop\nPRETTY_HOSTNAME=\"Jane's Laptop\"\n", hostname: "jl") == "Jane's Laptop")
        #expect(DeviceName.default(machineInfo: "PRETTY_HOSTNAME=Work PC", hostname: "jl") == "Work PC")
        #expect(DeviceName.default(machineInfo: "PRETTY_HOSTNAME=", hostname: "jl") == "jl")
        #expect(DeviceName.default(machineInfo: nil, hostname: "jl") == "jl")
    }
}
