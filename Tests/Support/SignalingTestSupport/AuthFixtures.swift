import CastSignaling

/// A JWT with the given claims (signature not checked by castd).
public func makeJWT(exp: Int64, sub: String = "u-1", extra: String = "") -> String {
    let header = Base64URL.encode(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
    let claims = Base64URL.encode(Array(#"{"sub":"\#(sub)","exp":\#(exp),"role":"authenticated"\#(extra)}"#.utf8))
    return "\(header).\(claims).c2lnbmF0dXJl"
}

public func sessionBody(access: String, refresh: String, expiresAt: Int64 = 0) -> String {
    #"{"access_token":"\#(access)","token_type":"bearer","expires_in":3600,"expires_at":\#(expiresAt),"refresh_token":"\#(refresh)","user":{"id":"u-1","is_anonymous":true}}"#
}
