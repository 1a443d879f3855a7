import CastCore

/// One `postgres_changes` push (docs/contract.md, wire C).
public struct PostgresChange: Sendable, Equatable {
    public var schema: String
    public var table: String
    public var type: String
    public var commitTimestamp: String?
    public var record: JSONValue
    public var oldRecord: JSONValue?
    /// e.g. `["Error 401: Unauthorized"]`; nil when the server says null.
    public var errors: [String]?

    public init(schema: String, table: String, type: String, commitTimestamp: String? = nil, record: JSONValue,
                oldRecord: JSONValue? = nil, errors: [String]? = nil) {
        self.schema = schema; self.table = table; self.type = type; self.commitTimestamp = commitTimestamp
        self.record = record; self.oldRecord = oldRecord; self.errors = errors
    }

    /// Reads `payload.data`; nil when the push is not a change we can use.
    public init?(payload: JSONValue) {
        guard let d = payload["data"], let table = d["table"]?.stringValue, let type = d["type"]?.stringValue else { return nil }
        schema = d["schema"]?.stringValue ?? "public"
        self.table = table
        self.type = type
        commitTimestamp = d["commit_timestamp"]?.stringValue
        record = d["record"] ?? .object([:])
        oldRecord = d["old_record"]
        errors = d["errors"]?.arrayValue?.compactMap { $0.stringValue }
    }

    /// The signaling row of an INSERT on `signaling_messages`.
    public var signalingRow: SignalingRow? {
        guard table == "signaling_messages", type == "INSERT",
              let bytes = try? JSONCoding.encode(record) else { return nil }
        return try? JSONCoding.decode(SignalingRow.self, from: bytes)
    }

    /// The new status of an UPDATE on `casting_sessions`.
    public var sessionStatus: SessionStatus? {
        guard table == "casting_sessions", type == "UPDATE", let s = record["status"]?.stringValue else { return nil }
        return SessionStatus(raw: s)
    }
}
