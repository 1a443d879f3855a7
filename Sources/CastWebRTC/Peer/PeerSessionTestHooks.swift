import CastCore
import CastRTP

// TEST ONLY. Everything in this file exists so that tests and development commands can
// make the peer misbehave on purpose; a cast never sets any of it (all defaults are off).

extension PeerSession {
    /// Fault injection for tests and `castd dev-send`; all off by default and in every cast.
    public struct TestHooks: Sendable {
        /// `castd dev-send --drop-rtp`: the share of outgoing media packets (not
        /// retransmissions, not RTCP) dropped before SRTP, so that a real receiver's
        /// NACKs and castd's RTX can be shown. Counted in `Statistics.injectedDrops`.
        public var dropMediaFraction: Double = 0
        public init() {}
    }

    /// The state behind `TestHooks.dropMediaFraction`: one seeded draw per media packet,
    /// so a run drops the same packets every time.
    struct TestMediaDropper {
        private var random = SeededRandom(seed: 0x0D_0D_0D)

        /// Whether to drop `d`: RTP only, never an RTX packet (payload type `rtxPayloadType`),
        /// with probability `fraction`. No draw is made when `fraction` is 0.
        mutating func drops(_ d: VideoSender.Datagram, fraction: Double, rtxPayloadType: UInt8?) -> Bool {
            guard fraction > 0, case .rtp(let p) = d, p.count > 1 else { return false }
            // RFC 3550 §5.1: the payload type is the low 7 bits of the second byte.
            guard p[1] & 0x7f != rtxPayloadType ?? 0xff else { return false }
            return Double.random(in: 0..<1, using: &random) < fraction
        }
    }
}
