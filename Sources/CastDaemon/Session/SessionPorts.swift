import CastCore
import CastSession
import CastSignaling

/// What the session controller needs from the signaling layer. The real
/// implementation speaks Supabase REST + Realtime and the iPadCast API
/// (CastSignaling); unit tests use an in-memory one.
public protocol SignalingPort: Sendable {
    /// Subscribes (session row UPDATE + signaling INSERT), waits for
    /// SUBSCRIBED, backfills, and from then on delivers de-duplicated rows
    /// addressed to the sender and status changes, in order. The first
    /// element after the backfilled rows is `.ready(status)`.
    func events() -> AsyncStream<SessionMachine.Input>
    func insert(_ row: OutgoingSignal) async -> SignalingOutbox<OutgoingSignal>.Outcome
    func sessionUpdate(_ action: SessionUpdateAction) async -> SessionUpdateResult
    /// Stops the subscription (the end of the run).
    func close() async
}

/// One WebRTC peer session (ICE + DTLS-SRTP + RTP) for one negotiation.
public protocol PeerPort: Sendable {
    /// Creates the peer for `negotiationId`; its offer, local candidates,
    /// gathering completion and state changes arrive as inputs on the stream.
    func create(negotiationId: String) async -> AsyncStream<SessionMachine.Input>
    /// Applies the answer; a failure comes back as `.answerFailed`.
    func applyAnswer(negotiationId: String, sdp: String) async -> SessionMachine.Input?
    func addRemoteCandidate(_ candidate: IceCandidatePayload) async
    func remoteEndOfCandidates(negotiationId: String) async
    func close() async
}

/// Capture + encode, feeding the current peer.
public protocol MediaPort: Sendable {
    func start(_ prefs: StreamPrefs) async
    func stop() async
}
