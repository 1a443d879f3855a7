import CastCore
import FoundationEssentials

/// The claims castd reads from an access token: `exp` (when to refresh) and
/// `sub` (the user id). The signature is never verified: a client only
/// decodes `exp` (docs/contract.md, wire A); the server verifies.
public struct JWTClaims: Sendable, Equatable {
    public var exp: Int64
    public var sub: String?

    /// Errors never include the token.
    public init(_ token: String) throws {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw CastError(.badJWT, "The access token is not a JWT (\(parts.count) parts, expected 3).") }
        // RFC 7515 §2: base64url without padding; tolerate padding anyway.
        var seg = String(parts[1])
        while seg.hasSuffix("=") { seg.removeLast() }
        guard let json = Base64URL.decode(seg),
              let obj = try? JSONCoding.decode(JSONValue.self, from: json), obj.objectValue != nil
        else { throw CastError(.badJWT, "The access token's claims are not base64url JSON.") }
        guard let exp = obj["exp"]?.intValue else { throw CastError(.badJWT, "The access token has no numeric exp claim.") }
        self.exp = exp
        self.sub = obj["sub"]?.stringValue
    }
}
