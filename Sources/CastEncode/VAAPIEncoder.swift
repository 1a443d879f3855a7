import CastCore
import CastMedia

/// H.264 through VA-API: Constrained Baseline (Main where the driver lacks
/// it), CBR at the cap with a one-frame buffer like the x264 path, an
/// infinite GOP with IDR on demand, SPS/PPS before each IDR, and our own
/// packed SPS/PPS/slice headers wherever the driver takes them.
///
/// This class is the control logic only: which picture is an IDR, frame_num
/// and idr_pic_id, which reconstructed surface is the reference, which headers
/// and rate-control buffers go with a picture. The VA calls are in a
/// `VAEncodeSession` (`LibVAEncodeSession` on a real render node).
///
/// Not verified on hardware: no machine castd is built on has a VA-API
/// encoder (docs/encoding.md); the tests drive this logic through a fake session and
/// parse the headers back with ffmpeg.
public final class VAAPIEncoder: VideoEncoder {
    public let kind = EncoderKind.vaapi
    public let inputFormat = PixelFormat.nv12
    public private(set) var config: EncoderConfig

    let session: any VAEncodeSession
    let sps: H264SequenceParameterSet
    let pps: H264PictureParameterSet

    private var keyframePending = true
    /// The rate-control buffers go with the next picture (set at IDRs and on changes).
    private var ratePending = true
    private var idrPicId = -1
    private var frameNum = 0
    private var picturesSinceIDR = 0
    private var reconstructed = 0
    private var reference: (slot: Int, pictureOrderCount: Int32, frameNum: Int)?

    /// Opens the first render node the probe found usable. `allowMain`: the
    /// receiver was offered Main (else only Constrained Baseline is used).
    public convenience init(config: EncoderConfig, probe: VAAPIProbe = .run(), allowMain: Bool = false) throws {
        // `config.h264Profile` is not read: this path writes Constrained Baseline (or Main)
        // headers only. Under a negotiated High payload type that stream is still valid (every
        // High decoder decodes Constrained Baseline), and castd offers High first only when
        // x264 will encode (docs/encoding.md).
        guard let node = probe.usable else {
            throw CastError(.encoderUnavailable, probe.unavailableReason ?? probe.summary)
        }
        try self.init(config: config, session: try LibVAEncodeSession(node: node.path, size: config.size, allowMain: allowMain))
    }

    init(config: EncoderConfig, session: any VAEncodeSession) throws {
        guard config.size.width > 0, config.size.height > 0, config.size.width % 2 == 0, config.size.height % 2 == 0 else {
            throw CastError(.encoder, "VA-API: picture size \(config.size) is not even; 4:2:0 needs even sides")
        }
        guard config.frameRate > 0, config.bitrate >= 1000 else {
            throw CastError(.encoder, "VA-API: frame rate \(config.frameRate) or bitrate \(config.bitrate) out of range")
        }
        self.config = config
        self.session = session
        let profile = session.capabilities.profile
        sps = H264SequenceParameterSet(size: config.size, frameRate: config.frameRate, profile: profile)
        pps = H264PictureParameterSet(profile: profile)
    }

    public func requestKeyframe() { keyframePending = true }

    public func setBitrate(_ bitsPerSecond: Int) throws {
        guard bitsPerSecond >= 1000 else { throw CastError(.encoder, "VA-API: bitrate \(bitsPerSecond) bps is too low") }
        config.bitrate = bitsPerSecond
        ratePending = true
    }

    /// The driver's rate control follows the new rate from the next picture on;
    /// the SPS keeps the VUI timing it was opened with (it states a maximum, not a fixed rate).
    public func setFrameRate(_ framesPerSecond: Int) throws {
        guard framesPerSecond > 0 else { throw CastError(.encoder, "VA-API: frame rate must be positive") }
        config.frameRate = framesPerSecond
        ratePending = true
    }

    /// CBR with a coded picture buffer of one frame at the target rate (as
    /// X264Encoder.applyRate), 90 % full at the start (x264's vbv_init).
    var rateParameters: [VAMiscParameter] {
        let buffer = max(1, config.bitrate / config.frameRate)
        return [
            .rateControl(bitsPerSecond: config.bitrate, windowMilliseconds: max(1, 1000 / config.frameRate)),
            .hrd(bufferSize: buffer, initialFullness: buffer * 9 / 10),
            .frameRate(config.frameRate),
        ]
    }

    public func encode(_ image: PlanarImage, pts: Instant) throws -> EncodedAccessUnit? {
        guard image.format == .nv12, image.size == config.size else {
            throw CastError(.encoder, "VA-API: expected NV12 \(config.size), got \(image.format) \(image.size)")
        }
        try session.upload(image)
        let idr = keyframePending
        let picId = idr ? (idrPicId + 1) % 65536 : idrPicId
        let num = idr ? 0 : frameNum
        let order = idr ? 0 : picturesSinceIDR
        let slice = H264SliceHeader(type: idr ? .i : .p, isIDR: idr, frameNum: num, idrPicId: max(0, picId))
        let request = VAPictureRequest(
            sequence: idr ? sps : nil, bitsPerSecond: config.bitrate, pps: pps, slice: slice,
            pictureOrderCount: Int32(truncatingIfNeeded: 2 * order), reconstructed: reconstructed,
            reference: idr ? nil : reference?.slot,
            referencePictureOrderCount: idr ? 0 : reference?.pictureOrderCount ?? 0,
            referenceFrameNum: idr ? 0 : reference?.frameNum ?? 0,
            packedHeaders: packedHeaders(idr: idr, slice: slice),
            misc: idr || ratePending ? rateParameters : [])
        var bytes = try session.encode(request)
        guard !bytes.isEmpty else {
            throw CastError(.encoder, "VA-API: the driver returned an empty coded buffer for a \(idr ? "IDR" : "P") picture")
        }
        // A driver that writes its own headers must still give the receiver an SPS and PPS before each IDR.
        if idr && !Self.containsNAL(type: H264NAL.UnitType.sps.rawValue, in: bytes) {
            bytes = sps.annexB + pps.annexB + bytes
        }
        // The picture is done: advance the state only now, so a failed picture changes nothing.
        keyframePending = false
        ratePending = false
        idrPicId = picId
        reference = (reconstructed, request.pictureOrderCount, num)
        reconstructed ^= 1
        frameNum = (num + 1) % (1 << sps.log2MaxFrameNum)
        picturesSinceIDR = order + 1
        return EncodedAccessUnit(bytes: bytes, isKeyframe: idr, pts: pts)
    }

    private func packedHeaders(idr: Bool, slice: H264SliceHeader) -> [VAPackedHeader] {
        let wanted = session.capabilities.packedHeaders
        var out: [VAPackedHeader] = []
        if idr && wanted.contains(.sequence) {
            let b = sps.annexB
            out.append(VAPackedHeader(kind: .sequence, bytes: b, bitLength: 8 * b.count))
        }
        if idr && wanted.contains(.picture) {
            let b = pps.annexB
            out.append(VAPackedHeader(kind: .picture, bytes: b, bitLength: 8 * b.count))
        }
        if wanted.contains(.slice) {
            let p = slice.packed(sps: sps, pps: pps)
            out.append(VAPackedHeader(kind: .slice, bytes: p.bytes, bitLength: p.bitLength))
        }
        return out
    }

    /// Whether an Annex-B buffer holds a NAL unit of this type.
    static func containsNAL(type: UInt8, in b: [UInt8]) -> Bool {
        var i = 0
        while i + 3 < b.count {
            if b[i] == 0 && b[i + 1] == 0 && b[i + 2] == 1 {
                if b[i + 3] & 0x1f == type { return true }
                i += 3
            } else {
                i += 1
            }
        }
        return false
    }
}
