import CastCore

/// The agent's connection state, as the session controller sees it (spec §11
/// reconnects on `.disconnected`/`.failed`; names follow RTCIceConnectionState).
public enum ICEConnectionState: String, Sendable, Equatable {
    case new, checking, connected, disconnected, failed, closed
}

/// Something the owner must act on or forward.
public enum ICEEvent: Equatable, Sendable {
    case stateChanged(ICEConnectionState)
    /// Trickle it to the receiver as an `ice_candidate` row (spec §8).
    case localCandidate(ICECandidate)
    /// Every local candidate has been found: send `endOfCandidates` (spec §6).
    case gatheringComplete
    /// A remote candidate names a host (Chrome's `<uuid>.local`): resolve it with mDNS
    /// and call `resolved(hostname:to:now:)`.
    case needsResolution(hostname: String)
    /// Media goes from `local` to `remote` from now on.
    case selectedPair(local: SocketAddress, remote: SocketAddress)
    /// A role conflict (RFC 8445 §7.3.1.1) changed our role.
    case roleChanged(controlling: Bool)
}

/// A datagram to send from one of our sockets (identified by its bound address).
public struct ICETransmit: Equatable, Sendable {
    public var from: SocketAddress
    public var to: SocketAddress
    public var datagram: [UInt8]
}

/// Timers and limits. Defaults follow RFC 8445 §14, RFC 7675 §5.1 and what browsers do.
public struct ICEConfig: Sendable {
    public var localUfrag: String
    public var localPwd: String
    /// ICE-CONTROLLING/ICE-CONTROLLED tie-breaker (RFC 8445 §7.1.1): random per session.
    public var tieBreaker: UInt64
    /// STUN servers from ice-config (spec §8), already resolved to addresses.
    public var stunServers: [SocketAddress] = []
    /// Pacing of new checks (RFC 8445 §14.2: 50 ms by default).
    public var ta: Duration = .milliseconds(50)
    /// Initial retransmission timeout of a check; doubled each time up to `maxRTO` (RFC 8489 §6.2.1).
    public var initialRTO: Duration = .milliseconds(250)
    public var maxRTO: Duration = .seconds(3)
    /// Transmissions of one request before it fails (RFC 8489 §6.2.1 Rc = 7).
    public var maxTransmissions: Int = 7
    /// After the first valid pair, wait at most this long for better pairs before nominating.
    public var nominationDelay: Duration = .milliseconds(300)
    /// RFC 7675 §5.1: a consent check every 5 s, randomized to 0.8–1.2 × 5 s.
    public var consentInterval: Duration = .seconds(5)
    /// RFC 7675 §5.1: consent expires 30 s after the last response.
    public var consentTimeout: Duration = .seconds(30)
    /// No consent response for this long → `.disconnected` (recovers on the next response).
    public var disconnectedTimeout: Duration = .seconds(7)
    /// While `.disconnected`, a consent check this often instead of every ~5 s, so that the
    /// path's return is noticed at once (browsers probe an unwritable connection faster too).
    public var consentRetryInterval: Duration = .milliseconds(500)
    /// Give up when nothing is connected after this long in `.checking`.
    public var checkingTimeout: Duration = .seconds(30)
    /// RFC 8445 §6.1.2.5: at most 100 pairs.
    public var maxPairs: Int = 100
    /// Seeds the jitter of consent checks; the shell passes a random value, tests a fixed one.
    public var seed: UInt64 = 0x5EED

    public init(localUfrag: String, localPwd: String, tieBreaker: UInt64) {
        self.localUfrag = localUfrag
        self.localPwd = localPwd
        self.tieBreaker = tieBreaker
    }
}

/// Timer jitter from a seeded generator (not for secrets): the shell seeds it
/// randomly, tests with a fixed value.
struct JitterRandom: Sendable {
    private var random: SeededRandom
    init(seed: UInt64) { random = SeededRandom(seed: seed) }

    /// A uniformly chosen fraction in [lo, hi] of `d`.
    mutating func scale(_ d: Duration, lo: Double, hi: Double) -> Duration {
        let f = lo + (hi - lo) * Double(random.next() >> 11) / Double(1 << 53)
        return .nanoseconds(Int64(Double(d.totalNanoseconds) * f))
    }
}
