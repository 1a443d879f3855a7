import CastCore

/// Disconnect reasons (docs/contract.md "Signaling rows"). Any other
/// reason is kept raw: the peer ended, and the reason is shown as is.
public enum DisconnectReason: Sendable, Equatable {
    case senderEnded, receiverEnded, denied, failed
    case other(String)

    public init(raw: String) {
        switch raw {
        case "sender_ended": self = .senderEnded
        case "receiver_ended": self = .receiverEnded
        case "denied": self = .denied
        case "failed": self = .failed
        default: self = .other(raw)
        }
    }

    public var raw: String {
        switch self {
        case .senderEnded: return "sender_ended"
        case .receiverEnded: return "receiver_ended"
        case .denied: return "denied"
        case .failed: return "failed"
        case .other(let s): return s
        }
    }
}

/// The receiver's stream preferences (spec §5). Every field is optional:
/// they are preferences, and castd decides the capture settings.
public struct StreamPrefs: Sendable, Equatable, Codable {
    public var autoQuality: Bool?
    public var resolution: String?
    public var frameRate: Int?

    public init(autoQuality: Bool? = nil, resolution: String? = nil, frameRate: Int? = nil) {
        self.autoQuality = autoQuality; self.resolution = resolution; self.frameRate = frameRate
    }

    init(_ v: JSONValue?) {
        autoQuality = v?["autoQuality"]?.boolValue
        resolution = v?["resolution"]?.stringValue
        frameRate = v?["frameRate"]?.intValue.map { Int($0) }
    }
}

public struct IceCandidatePayload: Sendable, Equatable {
    public var negotiationID: String
    public var candidate: String
    public var sdpMid: String?
    public var sdpMLineIndex: Int?
    public var usernameFragment: String?

    public init(negotiationID: String, candidate: String, sdpMid: String? = "0", sdpMLineIndex: Int? = 0,
                usernameFragment: String? = nil) {
        self.negotiationID = negotiationID; self.candidate = candidate; self.sdpMid = sdpMid
        self.sdpMLineIndex = sdpMLineIndex; self.usernameFragment = usernameFragment
    }
}

/// A signaling message addressed to castd, read from a row's `message_type`
/// and `payload` (docs/contract.md "Signaling rows"). Parsing is tolerant:
/// unknown types are `.unknown`, extra fields are ignored, and a known type
/// with an unusable payload is `.invalid` so the caller can log and skip it.
public enum SignalingMessage: Sendable, Equatable {
    case joinRequest(deviceName: String?)
    case joinApproved(senderAuthExpiresAt: String?, streamPrefs: StreamPrefs)
    case offer(sdp: String, negotiationID: String)
    case answer(sdp: String, negotiationID: String)
    case iceCandidate(IceCandidatePayload)
    case endOfCandidates(negotiationID: String)
    case disconnect(DisconnectReason)
    case unknown(type: String)
    case invalid(type: String, why: String)

    public init(row: SignalingRow) {
        self.init(type: row.messageType, payload: row.payload)
    }

    public init(type: String, payload p: JSONValue) {
        switch type {
        case "join_request":
            self = .joinRequest(deviceName: p["deviceName"]?.stringValue)
        case "join_approved":
            self = .joinApproved(senderAuthExpiresAt: p["senderAuthExpiresAt"]?.stringValue,
                                 streamPrefs: StreamPrefs(p["streamPrefs"]))
        case "offer", "answer":
            guard let sdp = p["sdp"]?.stringValue else { self = .invalid(type: type, why: "no sdp"); return }
            guard let n = p["negotiationId"]?.stringValue else { self = .invalid(type: type, why: "no negotiationId"); return }
            self = type == "offer" ? .offer(sdp: sdp, negotiationID: n) : .answer(sdp: sdp, negotiationID: n)
        case "ice_candidate":
            guard let n = p["negotiationId"]?.stringValue else { self = .invalid(type: type, why: "no negotiationId"); return }
            if p["endOfCandidates"]?.boolValue == true { self = .endOfCandidates(negotiationID: n); return }
            guard let cand = p["candidate"]?.stringValue else { self = .invalid(type: type, why: "no candidate"); return }
            // An empty candidate string is how browsers spell end-of-candidates.
            if cand.isEmpty { self = .endOfCandidates(negotiationID: n); return }
            self = .iceCandidate(IceCandidatePayload(
                negotiationID: n, candidate: cand, sdpMid: p["sdpMid"]?.stringValue,
                sdpMLineIndex: p["sdpMLineIndex"]?.intValue.map { Int($0) },
                usernameFragment: p["usernameFragment"]?.stringValue))
        case "disconnect":
            guard let r = p["reason"]?.stringValue else { self = .invalid(type: type, why: "no reason"); return }
            self = .disconnect(DisconnectReason(raw: r))
        default:
            self = .unknown(type: type)
        }
    }
}

/// A message castd sends to the receiver (spec §6).
public enum OutgoingSignal: Sendable, Equatable {
    case offer(sdp: String, negotiationID: String)
    case iceCandidate(IceCandidatePayload)
    case endOfCandidates(negotiationID: String)
    case disconnect(DisconnectReason)

    public var messageType: String {
        switch self {
        case .offer: return "offer"
        case .iceCandidate, .endOfCandidates: return "ice_candidate"
        case .disconnect: return "disconnect"
        }
    }

    public var payload: JSONValue {
        switch self {
        case .offer(let sdp, let n):
            return .object(["type": .string("offer"), "sdp": .string(sdp), "negotiationId": .string(n)])
        case .iceCandidate(let c):
            var o: [String: JSONValue] = ["negotiationId": .string(c.negotiationID), "candidate": .string(c.candidate)]
            if let m = c.sdpMid { o["sdpMid"] = .string(m) }
            if let i = c.sdpMLineIndex { o["sdpMLineIndex"] = .int(Int64(i)) }
            if let u = c.usernameFragment { o["usernameFragment"] = .string(u) }
            return .object(o)
        case .endOfCandidates(let n):
            return .object(["negotiationId": .string(n), "endOfCandidates": .bool(true)])
        case .disconnect(let r):
            return .object(["reason": .string(r.raw)])
        }
    }
}

/// Session statuses (docs/contract.md "Signaling rows").
public enum SessionStatus: Sendable, Equatable {
    case waiting, pairing, connecting, connected, disconnected, expired
    case other(String)

    public init(raw: String) {
        switch raw {
        case "waiting": self = .waiting
        case "pairing": self = .pairing
        case "connecting": self = .connecting
        case "connected": self = .connected
        case "disconnected": self = .disconnected
        case "expired": self = .expired
        default: self = .other(raw)
        }
    }

    public var raw: String {
        switch self {
        case .waiting: return "waiting"
        case .pairing: return "pairing"
        case .connecting: return "connecting"
        case .connected: return "connected"
        case .disconnected: return "disconnected"
        case .expired: return "expired"
        case .other(let s): return s
        }
    }

    /// Ended for good: nothing more will happen on this session.
    public var isFinal: Bool { self == .disconnected || self == .expired }
}
