/// What a datagram on the one ICE/DTLS/SRTP socket is, by its first byte
/// (RFC 7983 §7, updating RFC 5764 §5.1.2):
///
///              +----------------+
///              |        [0..3] -+--> STUN
///              |      [16..19] -+--> ZRTP
///   packet --> |      [20..63] -+--> DTLS
///              |      [64..79] -+--> TURN channel
///              |    [128..191] -+--> RTP/RTCP
///              +----------------+
///
/// Everything else is dropped.
public enum PacketKind: Sendable, Equatable {
    case stun, zrtp, dtls, turnChannel, rtpOrRtcp, unknown

    /// Inlinable, so that a caller in another module gets it specialised: the generic
    /// version's `first` allocates (issue 19; the driver classifies every datagram).
    @inlinable
    public init<C: Collection>(classifying datagram: C) where C.Element == UInt8 {
        guard let b = datagram.first else { self = .unknown; return }
        switch b {
        case 0...3: self = .stun
        case 16...19: self = .zrtp
        case 20...63: self = .dtls
        case 64...79: self = .turnChannel
        case 128...191: self = .rtpOrRtcp
        default: self = .unknown
        }
    }

    /// RTCP, not RTP, when the payload type byte is in 192...223 (RFC 5761 §4:
    /// RTCP packet types 200–204 and feedback 205/206 fall here with or without the marker bit).
    @inlinable
    public static func isRTCP<C: Collection>(_ datagram: C) -> Bool where C.Element == UInt8, C.Index == Int {
        guard datagram.count >= 2 else { return false }
        let pt = datagram[datagram.startIndex + 1]
        return pt >= 192 && pt <= 223
    }
}
