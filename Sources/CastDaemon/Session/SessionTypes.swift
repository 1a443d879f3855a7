import CastCore

/// Session statuses (contract-addendum.md, "Session statuses").
public enum SessionStatus: String, Sendable, Equatable, CaseIterable {
    case waiting, pairing, connecting, connected, disconnected, expired

    /// spec §6: the sender may insert rows only in these.
    public var isActive: Bool { self == .pairing || self == .connecting || self == .connected }
}

/// The receiver's preferences from `join_approved` (spec §5). Only preferences:
/// castd caps them at 1080p30 (spec §12).
public struct StreamPrefs: Sendable, Equatable {
    public var autoQuality: Bool
    public var resolution: String     // "720p" | "1080p" | "native"
    public var frameRate: Int         // 30 | 60

    public init(autoQuality: Bool = true, resolution: String = "1080p", frameRate: Int = 30) {
        self.autoQuality = autoQuality
        self.resolution = resolution
        self.frameRate = frameRate
    }
}

/// An ICE candidate as carried in an `ice_candidate` row (contract-addendum.md).
public struct CandidateInit: Sendable, Equatable {
    public var candidate: String          // "candidate:…", without "a="
    public var sdpMid: String?
    public var sdpMLineIndex: Int?
    public var usernameFragment: String?

    public init(candidate: String, sdpMid: String? = "0", sdpMLineIndex: Int? = 0, usernameFragment: String? = nil) {
        self.candidate = candidate
        self.sdpMid = sdpMid
        self.sdpMLineIndex = sdpMLineIndex
        self.usernameFragment = usernameFragment
    }
}

/// Rows the sender inserts (sender_role "sender", recipient_role "receiver").
public enum OutgoingSignal: Sendable, Equatable {
    case offer(negotiationId: String, sdp: String)
    case candidate(negotiationId: String, CandidateInit)
    case endOfCandidates(negotiationId: String)
    case disconnect(reason: String)

    public var negotiationId: String? {
        switch self {
        case .offer(let n, _), .candidate(let n, _), .endOfCandidates(let n): return n
        case .disconnect: return nil
        }
    }
}

/// Rows addressed to the sender, already de-duplicated by row id.
public enum IncomingSignal: Sendable, Equatable {
    /// `senderAuthExpiresAt` converted by the shell to the monotonic clock.
    case joinApproved(authExpiresAt: Instant?, prefs: StreamPrefs)
    case answer(negotiationId: String, sdp: String)
    case candidate(negotiationId: String, CandidateInit)
    case endOfCandidates(negotiationId: String)
    case disconnect(reason: String)
}

/// The peer connection's state as the transport reports it (RFC 8445 states, W3C names).
public enum PeerConnectionState: String, Sendable, Equatable {
    case new, checking, connected, disconnected, failed, closed
}

/// `POST /api/public/session-update` actions (spec §9).
public enum SessionUpdateAction: String, Sendable, Equatable {
    case connected, heartbeat, end
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
