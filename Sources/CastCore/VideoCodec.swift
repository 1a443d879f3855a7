/// The video codecs castd can send, in the order it offers them (spec §7:
/// H.264 first, VP8 as the fallback). Shared by the encoders (CastEncode),
/// the packetizers (CastRTP) and negotiation (CastWebRTC), which do not
/// depend on one another.
public enum VideoCodec: String, Sendable, CaseIterable, CustomStringConvertible {
    case h264
    case vp8

    public var description: String { rawValue }
}

extension VideoCodec {
    /// How people write it ("H.264", "VP8").
    public var displayName: String {
        switch self {
        case .h264: "H.264"
        case .vp8: "VP8"
        }
    }
}
