import CastCore
import FoundationEssentials

/// The pairing URL a receiver's QR code encodes (spec §3):
/// `https://<host>/pair?t=<token>&s=<sessionId>`.
///
/// `t` is 32 random bytes in base64url without padding, so exactly 43
/// characters; it is a single-use secret and stays `Redacted`. `s` is the
/// session UUID, kept in lowercase as the backend prints it.
public struct PairingURL: Sendable, Equatable, CustomStringConvertible {
    public let token: Redacted<String>
    public let sessionID: String
    /// The scheme and host the code came from (for messages; never the token).
    public let origin: String

    /// spec §3: 32 bytes → 43 base64url characters, no `=`.
    public static let tokenLength = 43

    public var description: String { "pairing URL for session \(sessionID) at \(origin)" }

    /// Parses and checks a scanned or pasted pairing URL. Surrounding
    /// whitespace is ignored. `https` is required, except that `http` is
    /// accepted for a loopback host so that the local stack can be used.
    public init(parsing text: String) throws {
        let trimmed = text.trimmingWhitespace()
        guard !trimmed.isEmpty, let c = URLComponents(string: trimmed),
              let scheme = c.scheme?.lowercased(), let host = c.host, !host.isEmpty
        else {
            throw CastError(.badPairingURL, "This is not a pairing URL: expected https://…/pair?t=…&s=….")
        }
        let loopback = host == "localhost" || host.hasPrefix("127.") || host == "::1" || host == "[::1]"
        guard scheme == "https" || (scheme == "http" && loopback) else {
            throw CastError(.badPairingURL, "A pairing URL must use https (got \(scheme)://).")
        }
        // The receiver may live under a path prefix; the last component must be `pair`.
        let path = c.path.hasSuffix("/") ? String(c.path.dropLast()) : c.path
        guard path == "/pair" || path.hasSuffix("/pair") else {
            throw CastError(.badPairingURL, "A pairing URL ends in /pair (got a URL for \(path.isEmpty ? "/" : path)).")
        }
        let items = c.queryItems ?? []
        let ts = items.filter { $0.name == "t" }
        let ss = items.filter { $0.name == "s" }
        guard ts.count <= 1, ss.count <= 1 else {
            throw CastError(.badPairingURL, "The pairing URL names t or s more than once.")
        }
        guard let t = ts.first?.value, !t.isEmpty else {
            throw CastError(.missingToken, "The pairing URL has no token (t=…); scan the code again.")
        }
        guard let s = ss.first?.value, !s.isEmpty else {
            throw CastError(.missingSessionID, "The pairing URL has no session id (s=…); scan the code again.")
        }
        guard PairingURL.isUUID(s) else {
            throw CastError(.badSessionID, "The pairing URL's session id is not a UUID.")
        }
        guard t.utf8.count == PairingURL.tokenLength, let raw = Base64URL.decode(t), raw.count == 32 else {
            // Say what is wrong with the shape without echoing the secret.
            throw CastError(.badToken, "The pairing URL's token is not 43 base64url characters (it has \(t.utf8.count)); scan the code again.")
        }
        token = Redacted(t)
        sessionID = s.lowercased()
        origin = "\(scheme)://\(host)\(c.port.map { ":\($0)" } ?? "")"
    }

    /// 8-4-4-4-12 hexadecimal digits (RFC 9562 §4), either case.
    public static func isUUID(_ s: String) -> Bool {
        let u = Array(s.utf8)
        guard u.count == 36 else { return false }
        for (i, ch) in u.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                if ch != UInt8(ascii: "-") { return false }
            } else if !(ch >= 48 && ch <= 57 || ch >= 97 && ch <= 102 || ch >= 65 && ch <= 70) {
                return false
            }
        }
        return true
    }
}
