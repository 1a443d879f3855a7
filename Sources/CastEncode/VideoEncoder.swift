import CastCore
import CastMedia

extension CastError.Code {
    /// An encoder could not be opened, configured or could not encode.
    public static let encoder = Self("encoder")
    /// No encoder of the requested kind exists on this machine.
    public static let encoderUnavailable = Self("encoder-unavailable")
}

/// What an encoder is asked to produce.
public struct EncoderConfig: Equatable, Sendable {
    public var size: FrameSize
    public var frameRate: Int
    /// Target bitrate in bits per second (spec §7: ≈ 4 Mbps at 1080p, 2.5 Mbps at 720p).
    public var bitrate: Int
    /// The H.264 profile the answer's payload type stands for (spec §7); VP8 ignores it.
    public var h264Profile: H264ProfileLevel

    public init(size: FrameSize, frameRate: Int, bitrate: Int, h264Profile: H264ProfileLevel = .constrainedBaseline) {
        self.size = size
        self.frameRate = frameRate
        self.bitrate = bitrate
        self.h264Profile = h264Profile
    }

    /// The config `caps` gives a captured size.
    public init(caps: CaptureCaps, captured: FrameSize, h264Profile: H264ProfileLevel = .constrainedBaseline) {
        let size = caps.targetSize(for: captured)
        self.init(size: size, frameRate: caps.maxFrameRate, bitrate: caps.bitrate(for: size), h264Profile: h264Profile)
    }
}

/// One encoded picture: for H.264 an access unit in Annex-B form (start codes,
/// SPS/PPS before each IDR); for VP8 one frame as libvpx emits it.
public struct EncodedAccessUnit: Sendable {
    public var bytes: [UInt8]
    public var isKeyframe: Bool
    /// The capture instant of the frame it encodes.
    public var pts: Instant

    public init(bytes: [UInt8], isKeyframe: Bool, pts: Instant) {
        self.bytes = bytes
        self.isKeyframe = isKeyframe
        self.pts = pts
    }
}

/// The kinds of encoder castd knows, in probe order (`EncoderChain.standardTable`).
public enum EncoderKind: String, Sendable, CaseIterable {
    case vaapi
    case x264
    /// VP8 (the fallback codec, spec §7).
    case libvpx

    /// The codec an encoder of this kind produces.
    public var codec: VideoCodec {
        switch self {
        case .vaapi, .x264: .h264
        case .libvpx: .vp8
        }
    }
}

/// A video encoder (H.264 or VP8). One owner (the encode thread) calls every
/// method; the encoder owns its C handle and frees it in `deinit`.
public protocol VideoEncoder: AnyObject {
    var kind: EncoderKind { get }
    /// What it produces (the packetizer must match).
    var codec: VideoCodec { get }
    /// What `encode` reads: `.i420` (x264) or `.nv12` (VA-API).
    var inputFormat: PixelFormat { get }
    var config: EncoderConfig { get }
    /// Encodes one picture of `config.size`. Nil when the encoder buffered it (never with our
    /// settings) or dropped it (libvpx's rate control, after a frame that overshot).
    func encode(_ image: PlanarImage, pts: Instant) throws -> EncodedAccessUnit?
    /// The next encoded picture is a keyframe (an IDR with SPS/PPS in front for H.264): PLI, a new viewer, a fallback.
    func requestKeyframe()
    func setBitrate(_ bitsPerSecond: Int) throws
    func setFrameRate(_ framesPerSecond: Int) throws
    /// The rate buffer in frames: 1 (no frame over its interval's share of the bitrate), more
    /// while a still picture is refined (`StillRefinement`). x264 follows it; VA-API and
    /// libvpx keep their own buffers (not measured here: the default ignores it).
    func setRateBuffer(frames: Int) throws
}

extension VideoEncoder {
    public var codec: VideoCodec { kind.codec }
}

extension VideoEncoder {
    public func setRateBuffer(frames: Int) throws {}
}
