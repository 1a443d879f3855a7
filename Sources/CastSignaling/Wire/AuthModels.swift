import CastCore

/// The session GoTrue returns from sign-up and refresh (docs/contract.md, wire A).
/// Both tokens are secrets and stay `Redacted`.
public struct AuthTokens: Sendable, Equatable {
    public var accessToken: Redacted<String>
    public var refreshToken: Redacted<String>
    public var userID: String
    /// Unix seconds; from `expires_at`, else from the JWT's `exp`.
    public var expiresAt: Int64

    public init(accessToken: Redacted<String>, refreshToken: Redacted<String>, userID: String, expiresAt: Int64) {
        self.accessToken = accessToken; self.refreshToken = refreshToken
        self.userID = userID; self.expiresAt = expiresAt
    }
}

struct AuthSessionBody: Decodable {
    struct User: Decodable { var id: String }
    var access_token: String
    var refresh_token: String
    var expires_in: Int64?
    var expires_at: Int64?
    var user: User?
}

extension AuthTokens {
    /// Decodes a sign-up or refresh answer. `exp` in the JWT wins over the
    /// body's fields when present: it is what every server checks.
    public static func decode(body: [UInt8], nowUnix: Int64) throws -> AuthTokens {
        let b: AuthSessionBody
        do { b = try JSONCoding.decode(AuthSessionBody.self, from: body) } catch {
            throw CastError(.authFailed, "The sign-in service answered with something that is not a session.")
        }
        let claims = try? JWTClaims(b.access_token)
        let exp = claims?.exp ?? b.expires_at ?? b.expires_in.map { nowUnix.saturatingAdd($0) }
        guard let expiresAt = exp else {
            throw CastError(.authFailed, "The sign-in service's session has no expiry.")
        }
        guard let uid = b.user?.id ?? claims?.sub else {
            throw CastError(.authFailed, "The sign-in service's session names no user.")
        }
        return AuthTokens(accessToken: Redacted(b.access_token), refreshToken: Redacted(b.refresh_token),
                          userID: uid, expiresAt: expiresAt)
    }
}
