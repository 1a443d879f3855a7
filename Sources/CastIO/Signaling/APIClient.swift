import CastCore
import CastSignaling
import FoundationEssentials

/// The iPadCast endpoints `/api/public/*` (spec §4, §5, §8, §9 and the
/// receiver endpoints of docs/contract.md for tests). Every call carries
/// `Authorization: Bearer <access token>` (spec §2).
public struct APIClient: Sendable {
    public let endpoints: Endpoints
    public let transport: HTTPTransport
    public var timeout: Duration = .seconds(15)

    public init(endpoints: Endpoints, transport: HTTPTransport) {
        self.endpoints = endpoints; self.transport = transport
    }

    public func sessionPair(_ req: SessionPairRequest, token: Redacted<String>) async throws -> SessionStatusResponse {
        try await call("POST", "session-pair", body: try JSONCoding.encode(req), token: token)
    }

    public func sessionUpdate(sessionID: String, action: SessionUpdateAction, token: Redacted<String>) async throws -> SessionStatusResponse {
        try await call("POST", "session-update", body: try JSONCoding.encode(SessionUpdateRequest(sessionId: sessionID, action: action)), token: token)
    }

    public func iceConfig(token: Redacted<String>) async throws -> IceConfig {
        try await call("GET", "ice-config", body: nil, token: token)
    }

    // Receiver side, for tests.
    public func sessionCreate(token: Redacted<String>) async throws -> SessionCreateResponse {
        try await call("POST", "session-create", body: Array("{}".utf8), token: token)
    }

    public func sessionApprove(_ req: SessionApproveRequest, token: Redacted<String>) async throws -> SessionStatusResponse {
        try await call("POST", "session-approve", body: try JSONCoding.encode(req), token: token)
    }

    public func sessionEnd(sessionID: String, token: Redacted<String>) async throws -> SessionStatusResponse {
        try await call("POST", "session-end", body: try JSONCoding.encode(SessionIDRequest(sessionId: sessionID)), token: token)
    }

    func call<T: Decodable>(_ method: String, _ name: String, body: [UInt8]?, token: Redacted<String>) async throws -> T {
        var h = ["Authorization": "Bearer \(token.unredacted)", "Accept": "application/json"]
        if body != nil { h["Content-Type"] = "application/json" }
        let r = try await transport.send(method: method, url: try endpoints.api("/api/public/\(name)"), headers: h, body: body, timeout: timeout)
        guard r.status == 200 else {
            throw ServerErrorMapping.api(status: r.status, body: r.body, retryAfter: r.header("retry-after"), endpoint: name)
        }
        do { return try JSONCoding.decode(T.self, from: r.body) } catch {
            throw CastError(.malformed, "The answer of \(name) does not have the expected shape.")
        }
    }
}
