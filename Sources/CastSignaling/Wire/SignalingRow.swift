import CastCore
import FoundationEssentials

/// Who a signaling row is from or for (docs/contract.md "Signaling rows").
public enum SignalingRole: String, Sendable, Codable, Equatable {
    case sender, receiver
}

/// One row of `public.signaling_messages` as PostgREST and Realtime deliver it.
/// Decoding is tolerant (docs/contract.md): unknown columns are ignored, a
/// missing payload reads as `{}`, and roles stay strings so that a row with a
/// role we do not know is filtered out rather than failing the whole batch.
public struct SignalingRow: Sendable, Equatable, Codable {
    public var id: String
    public var sessionID: String
    public var senderRole: String
    public var recipientRole: String
    public var messageType: String
    public var payload: JSONValue
    public var createdAt: String

    enum CodingKeys: String, CodingKey {
        case id, payload
        case sessionID = "session_id", senderRole = "sender_role", recipientRole = "recipient_role"
        case messageType = "message_type", createdAt = "created_at"
    }

    public init(id: String, sessionID: String, senderRole: String, recipientRole: String,
                messageType: String, payload: JSONValue, createdAt: String) {
        self.id = id; self.sessionID = sessionID; self.senderRole = senderRole
        self.recipientRole = recipientRole; self.messageType = messageType
        self.payload = payload; self.createdAt = createdAt
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(String.self, forKey: .id)
        sessionID = try c.decode(String.self, forKey: .sessionID)
        senderRole = try c.decodeIfPresent(String.self, forKey: .senderRole) ?? ""
        recipientRole = try c.decodeIfPresent(String.self, forKey: .recipientRole) ?? ""
        messageType = try c.decodeIfPresent(String.self, forKey: .messageType) ?? ""
        payload = try c.decodeIfPresent(JSONValue.self, forKey: .payload) ?? .object([:])
        if payload == .null { payload = .object([:]) }
        createdAt = try c.decodeIfPresent(String.self, forKey: .createdAt) ?? ""
    }

    public var isForSender: Bool { recipientRole == SignalingRole.sender.rawValue }
}

/// The row castd inserts (spec §6): `sender_role` is always `sender` and
/// `recipient_role` always `receiver`, the only combination RLS accepts.
public struct OutgoingSignalingRow: Sendable, Equatable, Encodable {
    public var sessionID: String
    public var messageType: String
    public var payload: JSONValue

    enum CodingKeys: String, CodingKey {
        case payload
        case sessionID = "session_id", senderRole = "sender_role", recipientRole = "recipient_role"
        case messageType = "message_type"
    }

    public init(sessionID: String, message: OutgoingSignal) {
        self.sessionID = sessionID
        self.messageType = message.messageType
        self.payload = message.payload
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(sessionID, forKey: .sessionID)
        try c.encode(SignalingRole.sender.rawValue, forKey: .senderRole)
        try c.encode(SignalingRole.receiver.rawValue, forKey: .recipientRole)
        try c.encode(messageType, forKey: .messageType)
        try c.encode(payload, forKey: .payload)
    }
}
