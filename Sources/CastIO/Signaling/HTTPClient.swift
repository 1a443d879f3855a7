import CastCore
import CastSignaling
import CastOpenSSL
import FoundationEssentials

/// How castd talks HTTP: `SocketHTTPTransport` (its own HTTP/1.1 client over
/// its TLS engine; TLS verification always on), a timeout per request, and
/// network failures turned into `CastError(.network / .timeout / .certificate)`
/// that name the host but never a header value (the bearer token lives there).
/// (URLSession is not used: it would link FoundationNetworking, libcurl and
/// ICU into castd, ~30 MiB of resident memory; issue 19.)
public protocol HTTPTransport: Sendable {
    func send(method: String, url: URL, headers: [String: String], body: [UInt8]?, timeout: Duration) async throws -> HTTPResponse
}

/// Builds requests against the Supabase host and the API host.
public struct Endpoints: Sendable {
    public let config: SignalingConfig
    public init(config: SignalingConfig) { self.config = config }

    static func join(_ base: String, _ path: String) throws -> URL {
        let b = base.hasSuffix("/") ? String(base.dropLast()) : base
        guard let u = URL(string: b + path), let scheme = u.scheme, scheme == "https" || scheme == "http" else {
            throw CastError(.usage, "Not an http(s) URL: \(b)")
        }
        return u
    }

    public func supabase(_ path: String) throws -> URL { try Self.join(config.supabaseURL, path) }
    public func api(_ path: String) throws -> URL { try Self.join(config.apiURL, path) }
}
