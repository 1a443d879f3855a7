import CastCore
import CastSignaling

// The wire types (SessionStatus, StreamPrefs, SignalingMessage, OutgoingSignal,
// IceCandidatePayload, DisconnectReason, SessionUpdateAction) come from
// CastSignaling; this file adds what the session logic needs on top.

extension SessionStatus {
    /// spec §6: the sender may insert rows only in these.
    public var acceptsSenderRows: Bool { self == .pairing || self == .connecting || self == .connected }
}

extension OutgoingSignal {
    /// The negotiation a row belongs to (nil for `disconnect`).
    public var negotiationID: String? {
        switch self {
        case .offer(_, let n), .endOfCandidates(let n): return n
        case .iceCandidate(let c): return c.negotiationID
        case .disconnect: return nil
        }
    }
}

/// The peer connection's state as the transport reports it (RFC 8445 states, W3C names).
public enum PeerConnectionState: String, Sendable, Equatable {
    case new, checking, connected, disconnected, failed, closed
}

/// How a `session-update` call ended, as the shell classifies it.
public enum SessionUpdateResult: Sendable, Equatable {
    case ok(authExpiresAt: Instant?)
    /// 404 not_found: not a participant, or the sender's authorization expired (spec §9, §10).
    case notFound
    /// 409 invalid_state: the session already ended.
    case invalidState
    /// Network error or 5xx: try again at the next heartbeat.
    case transient
}
