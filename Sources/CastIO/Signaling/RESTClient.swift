import CastCore
import CastSignaling
import FoundationEssentials

/// PostgREST on `signaling_messages` and `casting_sessions` (spec §5, §6;
/// docs/contract.md, wire B). Errors are read from the body's SQLSTATE.
public struct RESTClient: Sendable {
    public let endpoints: Endpoints
    public let transport: HTTPTransport
    public var timeout: Duration = .seconds(15)

    public init(endpoints: Endpoints, transport: HTTPTransport) {
        self.endpoints = endpoints; self.transport = transport
    }

    func headers(_ token: Redacted<String>) -> [String: String] {
        ["apikey": endpoints.config.supabaseKey, "Authorization": "Bearer \(token.unredacted)",
         "Content-Type": "application/json", "Accept": "application/json"]
    }

    /// The backfill select of spec §5, exactly.
    public static func backfillPath(sessionID: String) -> String {
        "/rest/v1/signaling_messages?session_id=eq.\(sessionID)&recipient_role=eq.sender&order=created_at.asc"
    }

    /// Inserts one row. `Prefer: return=minimal` is required: with
    /// `return=representation` the SELECT policy is checked on a row the
    /// sender may not read, and a legitimate insert fails (docs/contract.md).
    public func insert(_ row: OutgoingSignalingRow, token: Redacted<String>) async throws {
        var h = headers(token)
        h["Prefer"] = "return=minimal"
        let r = try await transport.send(method: "POST", url: try endpoints.supabase("/rest/v1/signaling_messages"),
                                         headers: h, body: try JSONCoding.encode(row), timeout: timeout)
        guard r.status == 201 || r.status == 204 || r.status == 200 else {
            throw ServerErrorMapping.postgrest(status: r.status, body: r.body)
        }
    }

    public func backfill(sessionID: String, token: Redacted<String>) async throws -> [SignalingRow] {
        let r = try await transport.send(method: "GET", url: try endpoints.supabase(Self.backfillPath(sessionID: Self.checked(sessionID))),
                                         headers: headers(token), body: nil, timeout: timeout)
        guard r.status == 200 else { throw ServerErrorMapping.postgrest(status: r.status, body: r.body) }
        return try Self.decodeRows(r.body)
    }

    /// The session's status (RLS lets its sender read the row, spec §5); nil if not visible.
    public func sessionStatus(sessionID: String, token: Redacted<String>) async throws -> SessionStatus? {
        let path = "/rest/v1/casting_sessions?select=status&id=eq.\(try Self.checked(sessionID))"
        let r = try await transport.send(method: "GET", url: try endpoints.supabase(path), headers: headers(token), body: nil, timeout: timeout)
        guard r.status == 200 else { throw ServerErrorMapping.postgrest(status: r.status, body: r.body) }
        guard let arr = try? JSONCoding.decode(JSONValue.self, from: r.body).arrayValue else {
            throw CastError(.malformed, "The database answered the session select with something that is not a list.")
        }
        return arr.first?["status"]?.stringValue.map(SessionStatus.init(raw:))
    }

    /// Rows that do not decode are skipped (tolerant parsing), never fatal.
    static func decodeRows(_ body: [UInt8]) throws -> [SignalingRow] {
        guard let arr = try? JSONCoding.decode([JSONValue].self, from: body) else {
            throw CastError(.malformed, "The database answered the backfill with something that is not a list.")
        }
        return arr.compactMap { v in (try? JSONCoding.encode(v)).flatMap { try? JSONCoding.decode(SignalingRow.self, from: $0) } }
    }

    /// A session id goes into a URL filter: only a UUID may.
    static func checked(_ id: String) throws -> String {
        guard PairingURL.isUUID(id) else { throw CastError(.badSessionID, "Not a session id (UUID): \(id.prefix(40))") }
        return id.lowercased()
    }
}
