import CastCore

/// A Phoenix channel message (docs/contract.md, wire C).
///
/// vsn 1.0.0 is an object `{"topic","event","payload","ref","join_ref"}`;
/// vsn 2.0.0 is an array `[join_ref, ref, topic, event, payload]`. Server
/// pushes carry null refs. Refs are stringified increasing integers.
public struct PhoenixEnvelope: Sendable, Equatable {
    public enum Version: String, Sendable { case v1 = "1.0.0", v2 = "2.0.0" }

    public var joinRef: String?
    public var ref: String?
    public var topic: String
    public var event: String
    public var payload: JSONValue

    public init(joinRef: String? = nil, ref: String? = nil, topic: String, event: String, payload: JSONValue) {
        self.joinRef = joinRef; self.ref = ref; self.topic = topic; self.event = event; self.payload = payload
    }

    public func encode(_ vsn: Version) -> String {
        let opt: (String?) -> JSONValue = { $0.map(JSONValue.string) ?? .null }
        let value: JSONValue
        switch vsn {
        case .v1:
            value = .object(["topic": .string(topic), "event": .string(event), "payload": payload,
                             "ref": opt(ref), "join_ref": opt(joinRef)])
        case .v2:
            value = .array([opt(joinRef), opt(ref), .string(topic), .string(event), payload])
        }
        // Encoding a JSONValue cannot fail: every case is representable.
        return (try? JSONCoding.encodeString(value)) ?? "null"
    }

    /// Decodes either form (the shape says which), so a server that answers
    /// in the other version is still understood. Refs given as numbers are
    /// accepted and kept as their decimal text.
    public static func decode(_ text: String) throws -> PhoenixEnvelope {
        guard let v = try? JSONCoding.decode(JSONValue.self, from: Array(text.utf8)) else {
            throw CastError(.phoenixEnvelope, "A Realtime message is not JSON.")
        }
        func ref(_ r: JSONValue?) throws -> String? {
            switch r {
            case nil, .null?: return nil
            case .string(let s)?: return s
            case .int(let i)?: return String(i)
            default: throw CastError(.phoenixEnvelope, "A Realtime message has a ref that is not a string.")
            }
        }
        switch v {
        case .array(let a):
            guard a.count == 5, let topic = a[2].stringValue, let event = a[3].stringValue else {
                throw CastError(.phoenixEnvelope, "A Realtime v2 message is not [join_ref, ref, topic, event, payload].")
            }
            return PhoenixEnvelope(joinRef: try ref(a[0]), ref: try ref(a[1]), topic: topic, event: event, payload: a[4])
        case .object(let o):
            guard let topic = o["topic"]?.stringValue, let event = o["event"]?.stringValue else {
                throw CastError(.phoenixEnvelope, "A Realtime v1 message lacks topic or event.")
            }
            return PhoenixEnvelope(joinRef: try ref(o["join_ref"]), ref: try ref(o["ref"]), topic: topic, event: event,
                                   payload: o["payload"] ?? .object([:]))
        default:
            throw CastError(.phoenixEnvelope, "A Realtime message is neither an array nor an object.")
        }
    }
}
