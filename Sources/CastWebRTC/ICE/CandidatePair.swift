import CastCore

/// RFC 8445 §6.1.2.6 pair states.
public enum CandidatePairState: String, Sendable, Equatable {
    case frozen, waiting, inProgress, succeeded, failed
}

/// One of our candidates. Host candidates are their own base; server-reflexive ones
/// send from their host base (RFC 8445 §5.1.1.2); relay candidates are their own base
/// too, the relayed address, and the owner sends from it through the TURN allocation.
public struct LocalCandidate: Equatable, Sendable {
    public var candidate: ICECandidate
    public var base: SocketAddress
    public var localPreference: UInt32

    /// Host and relay candidates are their own base (RFC 8445 §5.1.1): they are what pairs
    /// are made of; server- and peer-reflexive candidates are only signalled.
    public var isOwnBase: Bool { candidate.type == .host || candidate.type == .relay }
}

/// A local base paired with a remote transport address (RFC 8445 §6.1.2).
public struct CandidatePair: Equatable, Sendable {
    /// The socket checks and media go out of.
    public var local: SocketAddress
    public var remote: SocketAddress
    public var localPriority: UInt32
    public var remotePriority: UInt32
    /// Our candidate's local preference, reused for the PRIORITY attribute (§7.1.1).
    var localPreference: UInt32
    public var foundation: String
    public var state: CandidatePairState = .frozen
    /// A check on this pair succeeded with symmetric addresses (§7.2.5.3).
    public var valid = false
    public var nominated = false
    /// Controlled role: the peer sent USE-CANDIDATE before our check succeeded (§7.3.1.5).
    var nominateOnSuccess = false

    /// RFC 8445 §6.1.2.3: pair priority = 2^32·MIN(G,D) + 2·MAX(G,D) + (G>D ? 1 : 0),
    /// G the controlling agent's candidate priority, D the controlled agent's.
    public static func priority(controlling g: UInt32, controlled d: UInt32) -> UInt64 {
        (UInt64(min(g, d)) << 32) + 2 * UInt64(max(g, d)) + (g > d ? 1 : 0)
    }

    public func priority(weAreControlling: Bool) -> UInt64 {
        weAreControlling
            ? Self.priority(controlling: localPriority, controlled: remotePriority)
            : Self.priority(controlling: remotePriority, controlled: localPriority)
    }
}
