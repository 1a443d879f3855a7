import CastCore
import CastMedia

/// H.264 through VA-API. Opening it probes the render nodes; the encode
/// path itself (NV12 surfaces, packed SPS/PPS/slice headers, CBR) is not
/// written yet, so on a machine that has a usable node it still fails with
/// a sentence saying so and the chain moves on to x264.
public final class VAAPIEncoder: VideoEncoder {
    public let kind = EncoderKind.vaapi
    public let inputFormat = PixelFormat.nv12
    public let config: EncoderConfig

    public init(config: EncoderConfig, probe: VAAPIProbe = .run()) throws {
        guard let node = probe.usable else {
            throw CastError(.encoderUnavailable, probe.summary)
        }
        _ = config
        throw CastError(.encoderUnavailable,
                        "VA-API: \(node.path) (driver \(node.driver ?? "unknown")) can encode H.264, but castd's VA-API encode path is not implemented yet; using x264")
    }

    public func encode(_ image: PlanarImage, pts: Instant) throws -> EncodedAccessUnit? { nil }
    public func requestKeyframe() {}
    public func setBitrate(_ bitsPerSecond: Int) throws {}
    public func setFrameRate(_ framesPerSecond: Int) throws {}
}
