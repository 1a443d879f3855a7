import CastCore

/// What the encode thread produces: the negotiated codec and, for H.264, the profile
/// (spec §7). Packed into one byte for the atomic the peer's thread writes.
struct VideoFormat: Equatable, Sendable, CustomStringConvertible {
    var codec: VideoCodec
    /// Ignored for VP8 (kept at Constrained Baseline so two VP8 formats are equal).
    var h264Profile: H264ProfileLevel

    init(codec: VideoCodec, h264Profile: H264ProfileLevel = .constrainedBaseline) {
        self.codec = codec
        self.h264Profile = codec == .h264 ? h264Profile : .constrainedBaseline
    }

    private static let h264Profiles = H264ProfileLevel.allCases

    /// 0: H.264 Constrained Baseline (the start), 1: VP8, 2 and up: the other H.264 profiles.
    var code: UInt8 {
        if codec == .vp8 { return 1 }
        let i = Self.h264Profiles.firstIndex(of: h264Profile)!
        return i == 0 ? 0 : UInt8(i + 1)
    }

    init(code: UInt8) {
        switch code {
        case 0: self.init(codec: .h264)
        case 1: self.init(codec: .vp8)
        default: self.init(codec: .h264, h264Profile: Self.h264Profiles[Int(code) - 1])
        }
    }

    /// `h264`, `h264-high`, `vp8` (log values).
    var description: String {
        codec == .h264 && h264Profile != .constrainedBaseline ? "h264-\(h264Profile)" : codec.rawValue
    }
}
