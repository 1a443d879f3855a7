import CastCore
import CastOpenSSL
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An HTTP answer, whatever its status.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [String: String]   // names lowercased
    public var body: [UInt8]

    public init(status: Int, headers: [String: String], body: [UInt8]) {
        self.status = status; self.headers = headers; self.body = body
    }

    public func header(_ name: String) -> String? { headers[name.lowercased()] }
}

/// The one place castd talks HTTP: URLSession (FoundationNetworking), TLS
/// verification left on (its default), a timeout per request, and network
/// failures turned into `CastError(.network / .timeout)` that name the host
/// but never a header value (the bearer token lives there).
public protocol HTTPTransport: Sendable {
    func send(method: String, url: URL, headers: [String: String], body: [UInt8]?, timeout: Duration) async throws -> HTTPResponse
}

public final class URLSessionTransport: HTTPTransport, @unchecked Sendable {
    // URLSession is thread-safe; the class only holds it.
    private let session: URLSession

    public init() {
        let c = URLSessionConfiguration.ephemeral
        c.httpCookieStorage = nil
        c.urlCache = nil
        c.requestCachePolicy = .reloadIgnoringLocalCacheData
        session = URLSession(configuration: c)
    }

    public func send(method: String, url: URL, headers: [String: String], body: [UInt8]?, timeout: Duration) async throws -> HTTPResponse {
        var req = URLRequest(url: url)
        req.httpMethod = method
        req.timeoutInterval = timeout.seconds
        for (k, v) in headers { req.setValue(v, forHTTPHeaderField: k) }
        if let b = body { req.httpBody = Data(b) }
        let host = url.host.map(AddressRedaction.redact) ?? "?"
        return try await withCheckedThrowingContinuation { cont in
            let task = session.dataTask(with: req) { data, response, error in
                if let e = error as? URLError {
                    let code: CastError.Code = e.code == .timedOut ? .timeout
                        : Self.isTLSFailure(e) ? .certificate : .network
                    cont.resume(throwing: CastError(code, "HTTP \(method) \(url.path) to \(host) failed: \(Self.describe(e))."))
                    return
                }
                if let e = error {
                    cont.resume(throwing: CastError(.network, "HTTP \(method) \(url.path) to \(host) failed: \(e.localizedDescription)."))
                    return
                }
                guard let http = response as? HTTPURLResponse else {
                    cont.resume(throwing: CastError(.network, "HTTP \(method) \(url.path) to \(host): no HTTP response."))
                    return
                }
                var h: [String: String] = [:]
                for (k, v) in http.allHeaderFields {
                    if let ks = k as? String, let vs = v as? String { h[ks.lowercased()] = vs }
                }
                cont.resume(returning: HTTPResponse(status: http.statusCode, headers: h, body: Array(data ?? Data())))
            }
            task.resume()
        }
    }

    static func describe(_ e: URLError) -> String {
        switch e.code {
        case .timedOut: return "timed out"
        case .cannotConnectToHost: return "connection refused"
        case .cannotFindHost, .dnsLookupFailed: return "host not found"
        case .notConnectedToInternet, .networkConnectionLost: return "network unavailable"
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate,
             .serverCertificateNotYetValid, .serverCertificateHasUnknownRoot:
            return "TLS certificate not trusted"
        default:
            // Linux URLSession reports libcurl's TLS failures as NSURLErrorUnknown with curl's
            // own text; name the failure from a fixed list rather than echo that text.
            return describeTLS(e.localizedDescription) ?? "error \(e.code.rawValue)"
        }
    }

    static func isTLSFailure(_ e: URLError) -> Bool {
        switch e.code {
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate,
             .serverCertificateNotYetValid, .serverCertificateHasUnknownRoot: return true
        default: return describeTLS(e.localizedDescription) != nil
        }
    }

    /// A fixed sentence for a TLS failure in libcurl's error text, or nil if it is not one.
    static func describeTLS(_ curlText: String) -> String? {
        let t = curlText.lowercased()
        guard t.contains("ssl") || t.contains("tls") || t.contains("certificate") else { return nil }
        let reasons = [("self-signed", "self-signed certificate"), ("self signed", "self-signed certificate"),
                       ("local issuer", "unknown issuer"), ("expired", "expired"), ("not yet valid", "not yet valid"),
                       ("subject name", "host name mismatch"), ("does not match", "host name mismatch")]
        let reason = reasons.first { t.contains($0.0) }.map { " (\($0.1))" } ?? ""
        return "TLS certificate not accepted\(reason)"
    }
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
