import CastCore
import CastSignaling
import CastSystem
import FoundationEssentials

/// GoTrue over HTTP (docs/contract.md, wire A): anonymous sign-up and refresh,
/// with the official retry of 5xx and network errors.
public struct AuthClient: Sendable {
    public let endpoints: Endpoints
    public let transport: HTTPTransport
    public var timeout: Duration = .seconds(15)
    /// Wall-clock Unix seconds (for `expires_in` when a token has no `exp`); injected for tests.
    public var nowUnix: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
    /// Waits between retries; injected so tests need not sleep.
    public var sleep: @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }

    public init(endpoints: Endpoints, transport: HTTPTransport) {
        self.endpoints = endpoints; self.transport = transport
    }

    var headers: [String: String] {
        ["apikey": endpoints.config.supabaseKey, "Authorization": "Bearer \(endpoints.config.supabaseKey)",
         "Content-Type": "application/json", "X-Supabase-Api-Version": "2024-01-01"]
    }

    /// `POST /auth/v1/signup` with an empty data object: a new anonymous user.
    public func signUpAnonymously() async throws -> AuthTokens {
        let body = Array(#"{"data":{},"gotrue_meta_security":{"captcha_token":null}}"#.utf8)
        return try await post(try endpoints.supabase("/auth/v1/signup"), body: body)
    }

    /// `POST /auth/v1/token?grant_type=refresh_token`. Dead sessions throw `ServerError(.sessionDead)`.
    public func refresh(_ refreshToken: Redacted<String>) async throws -> AuthTokens {
        let body = try JSONCoding.encode(["refresh_token": refreshToken.unredacted])
        return try await post(try endpoints.supabase("/auth/v1/token?grant_type=refresh_token"), body: body)
    }

    private func post(_ url: URL, body: [UInt8]) async throws -> AuthTokens {
        let clock = SystemMonotonicClock()
        let start = clock.now()
        var attempt = 0
        while true {
            attempt += 1
            let failure: Error
            do {
                let r = try await transport.send(method: "POST", url: url, headers: headers, body: body, timeout: timeout)
                if r.status == 200 { return try AuthTokens.decode(body: r.body, nowUnix: nowUnix()) }
                let e = ServerErrorMapping.auth(status: r.status, body: r.body)
                guard e.isRetryable else { throw e }
                failure = e
            } catch let e as CastError where e.code == .network || e.code == .timeout {
                failure = e
            }
            guard let d = RetryPolicy.delay(afterAttempt: attempt, elapsed: clock.now() - start) else { throw failure }
            try await sleep(d)
        }
    }
}
