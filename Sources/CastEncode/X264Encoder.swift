import CastCore
import CastMedia
import CX264
#if canImport(Glibc)
import Glibc
#endif

/// H.264 through libx264, set up for interactive screen streaming to a
/// browser: the negotiated profile (`EncoderConfig.h264Profile`: Constrained
/// Baseline 42e01f, what every receiver decodes, or Constrained High 640c1f, CABAC
/// and the 8×8 transform), zero latency, CBR with a one-frame VBV buffer, IDR only on demand.
public final class X264Encoder: VideoEncoder {
    public let kind = EncoderKind.x264
    public let inputFormat = PixelFormat.i420
    public private(set) var config: EncoderConfig

    /// The preset, chosen for a 2-core machine by `Scripts/bench-capture-encode`
    /// (1080p, two slice threads, a shared and busy 2-core host): on a busy
    /// screen "superfast" encodes in 35 ms p50 and "veryfast" in 57 ms; on a
    /// static one 13 ms and 31 ms. Only superfast comes near the 33 ms of 30 fps.
    public static let defaultPreset = "superfast"

    /// The lowest QP x264's rate control may pick (x264's own default is 0). On
    /// mostly-still screen content under budget, ABR drives the frame QP to 0 on
    /// nearly every P picture, spending up to three times the bits for PSNR-Y far
    /// above what shows; 12 keeps ≥ 48 dB there (docs/quality.md, "Decoder QP").
    public static let defaultMinimumQP = 12

    private let handle: OpaquePointer
    private var param: x264_param_t
    /// The frame rate x264 was opened with (its rate control cannot change it; see setFrameRate).
    private let openedFrameRate: Int
    private var keyframePending = false
    private var frameIndex: Int64 = 0
    private var ptsByIndex: [Int64: Instant] = [:]

    /// Slice threads: one per core, at most 4 (each adds a slice to every picture).
    public static func sliceThreads(cores: Int) -> Int { max(1, min(4, cores)) }

    /// H.264 Table A-1 (see `H264SequenceParameterSet.level`): 3.1 up to 720p30, else 4.0.
    public static func level(for size: FrameSize, frameRate: Int) -> Int32 {
        Int32(H264SequenceParameterSet.level(for: size, frameRate: frameRate))
    }

    public init(config: EncoderConfig, preset: String = X264Encoder.defaultPreset,
                threads: Int = X264Encoder.sliceThreads(cores: Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))),
                minimumQP: Int = X264Encoder.defaultMinimumQP) throws {
        guard config.size.width % 2 == 0, config.size.height % 2 == 0, config.size.width > 0, config.size.height > 0 else {
            throw CastError(.encoder, "x264: picture size \(config.size) is not even; 4:2:0 needs even sides")
        }
        guard config.frameRate > 0, config.bitrate >= 1000 else {
            throw CastError(.encoder, "x264: frame rate \(config.frameRate) or bitrate \(config.bitrate) out of range")
        }
        var p = x264_param_t()
        guard x264_param_default_preset(&p, preset, "zerolatency") == 0 else {
            throw CastError(.encoder, "x264: unknown preset \(preset)")
        }
        p.i_log_level = X264_LOG_ERROR
        p.i_csp = X264_CSP_I420
        p.i_width = Int32(config.size.width)
        p.i_height = Int32(config.size.height)
        p.i_fps_num = UInt32(config.frameRate)
        p.i_fps_den = 1
        p.i_timebase_num = 1
        p.i_timebase_den = UInt32(config.frameRate)
        p.b_vfr_input = 0
        // Latency: no B-frames, no lookahead, slice threads instead of frame threads
        // (frame threads add a frame of delay per thread).
        p.i_bframe = 0
        p.rc.i_lookahead = 0
        p.i_sync_lookahead = 0
        p.b_sliced_threads = 1
        p.i_threads = Int32(threads)
        p.i_slice_count = Int32(threads)
        // An infinite GOP: IDRs only when asked (PLI, fallback), none from scene cuts.
        p.i_keyint_max = X264_KEYINT_MAX_INFINITE
        p.i_scenecut_threshold = 0
        p.b_intra_refresh = 0
        // SPS/PPS before every IDR, Annex-B start codes (RFC 6184 packetizer input).
        p.b_repeat_headers = 1
        p.b_annexb = 1
        p.i_level_idc = Self.level(for: config.size, frameRate: config.frameRate)
        // BT.709 limited range, matching PixelConverter (H.264 Annex E, E.2.1).
        p.vui.i_colorprim = 1
        p.vui.i_transfer = 1
        p.vui.i_colmatrix = 1
        p.vui.b_fullrange = 0
        Self.applyRate(&p, bitrate: config.bitrate, frameRate: config.frameRate, openedFrameRate: config.frameRate)
        p.rc.i_qp_min = Int32(minimumQP)
        // Screen content: no loop filter. Measured on the quality bench's contents (scrolling text,
        // slides, a video over text) at 1, 2 and 4 Mbit/s and at 30 and 15 fps, with these
        // settings otherwise (`castkit.bench.x264_tuning`, docs/quality.md): the filter smooths the
        // sharp edges of glyphs and drawn shapes, and without it the mean PSNR-Y rose in 17 of 18
        // cells (up to 4.2 dB) and SSIM in all 18, for as many bits or fewer and less encode time.
        // The cost: the frames just after a whole-slide change at 1-2 Mbit/s and 30 fps are
        // blockier (PSNR-Y 5th percentile 29.0 against 32.8 dB at 1 Mbit/s). Weaker filter offsets
        // gained less; adaptive quantisation and the preset stay (no change won in every cell).
        p.b_deblocking_filter = 0
        // Constrained Baseline: no CABAC, no 8×8 transform, no B-frames, no interlace.
        // High keeps the preset's CABAC and 8×8 transform; with no B-frames and progressive
        // pictures x264 marks it Constrained High (constraint_set4 and 5: 640c).
        let profile = Self.x264ProfileName(config.h264Profile)
        guard x264_param_apply_profile(&p, profile) == 0 else {
            throw CastError(.encoder, "x264: the \(profile) profile rejected these settings")
        }
        // Memory (issue 7): without huge pages x264's worst-case-sized bitstream buffers
        // cost only the pages a frame writes, not 2 MiB each; its picture buffers are
        // written in full either way. Best effort: a refusal changes nothing else.
        _ = castd_disable_transparent_huge_pages()
        guard let h = castd_x264_encoder_open(&p) else {
            throw CastError(.encoder, "x264: x264_encoder_open failed for \(config.size) at \(config.frameRate) fps")
        }
        handle = h
        param = p
        openedFrameRate = config.frameRate
        self.config = config
    }

    deinit { x264_encoder_close(handle) }

    /// Sets constraint_set4 and constraint_set5 in the SPS whose start code begins at `start`
    /// (H.264 A.2.4.2, Constrained High: progressive pictures only, no B slices, both true
    /// of castd's stream). x264 writes High's constraint flags as 0 (profile-level-id 6400xx);
    /// with them the SPS says 640c, what castd offered. The byte after (level_idc) is never 0,
    /// so no emulation-prevention byte depends on this one.
    static func markConstrainedHigh(_ bytes: inout [UInt8], at start: Int) {
        var i = start
        while i < bytes.count, bytes[i] == 0 { i += 1 }   // the start code's zeros, then its 1
        let header = i + 1
        guard header + 2 < bytes.count, bytes[i] == 1, bytes[header] & 0x1f == 7, bytes[header + 1] == 100 else { return }
        bytes[header + 2] |= 0x0c
    }

    /// x264's name for a negotiated profile (`x264_param_apply_profile`).
    static func x264ProfileName(_ p: H264ProfileLevel) -> String {
        switch p {
        case .constrainedBaseline: "baseline"
        case .main: "main"
        case .high: "high"
        }
    }

    /// CBR: ABR with the VBV max rate at the target and a buffer of one frame
    /// at that rate, so that no frame can be more than one interval's worth
    /// of bits late on the wire. x264 ties bits-per-frame to the frame rate it
    /// was opened with, so for a different rate the bitrate it is given is
    /// scaled by opened/actual, which gives each real frame interval its share.
    /// CBR at `bitrate`; the VBV buffer holds `bufferFrames` frames' worth (one, except while
    /// a still picture is refined: `setRateBuffer(frames:)`).
    static func applyRate(_ p: inout x264_param_t, bitrate: Int, frameRate: Int, openedFrameRate: Int, bufferFrames: Int = 1) {
        let kbps = max(1, (bitrate * openedFrameRate / frameRate + 500) / 1000)
        p.rc.i_rc_method = X264_RC_ABR
        p.rc.i_bitrate = Int32(kbps)
        p.rc.i_vbv_max_bitrate = Int32(kbps)
        p.rc.i_vbv_buffer_size = Int32(max(1, kbps * max(1, bufferFrames) / openedFrameRate))
    }

    public func requestKeyframe() { keyframePending = true }

    public func setBitrate(_ bitsPerSecond: Int) throws {
        try reconfigure(bitrate: bitsPerSecond, frameRate: config.frameRate)
    }

    public func setFrameRate(_ framesPerSecond: Int) throws {
        guard framesPerSecond > 0 else { throw CastError(.encoder, "x264: frame rate must be positive") }
        try reconfigure(bitrate: config.bitrate, frameRate: framesPerSecond)
    }

    /// The VBV buffer in frames (1: no frame over its interval's share of the bitrate).
    public private(set) var rateBufferFrames = 1

    /// While a still picture is refined (`StillRefinement`): a VBV buffer of `frames` frames,
    /// which lets x264 spend the budget its one-frame buffer leaves unused on a still
    /// picture; back to 1 for a change.
    public func setRateBuffer(frames: Int) throws {
        let frames = max(1, frames)
        guard frames != rateBufferFrames else { return }
        rateBufferFrames = frames
        try reconfigure(bitrate: config.bitrate, frameRate: config.frameRate)
    }

    private func reconfigure(bitrate: Int, frameRate: Int) throws {
        var p = x264_param_t()
        x264_encoder_parameters(handle, &p)
        Self.applyRate(&p, bitrate: bitrate, frameRate: frameRate, openedFrameRate: openedFrameRate,
                       bufferFrames: rateBufferFrames)
        guard x264_encoder_reconfig(handle, &p) == 0 else {
            throw CastError(.encoder, "x264: x264_encoder_reconfig refused \(bitrate) bps at \(frameRate) fps")
        }
        param = p
        config.bitrate = bitrate
        config.frameRate = frameRate
    }

    public func encode(_ image: PlanarImage, pts: Instant) throws -> EncodedAccessUnit? {
        guard image.format == .i420, image.size == config.size else {
            throw CastError(.encoder, "x264: expected I420 \(config.size), got \(image.format) \(image.size)")
        }
        var pic = x264_picture_t()
        x264_picture_init(&pic)
        pic.img.i_csp = X264_CSP_I420
        pic.img.i_plane = 3
        pic.img.i_stride = (Int32(image.strides[0]), Int32(image.strides[1]), Int32(image.strides[2]), 0)
        pic.img.plane = (image.plane(0), image.plane(1), image.plane(2), nil)
        pic.i_pts = frameIndex
        pic.i_type = keyframePending ? X264_TYPE_IDR : X264_TYPE_AUTO
        ptsByIndex[frameIndex] = pts
        frameIndex += 1

        var nals: UnsafeMutablePointer<x264_nal_t>? = nil
        var count: Int32 = 0
        var out = x264_picture_t()
        let size = x264_encoder_encode(handle, &nals, &count, &pic, &out)
        if size < 0 { throw CastError(.encoder, "x264: x264_encoder_encode failed (\(size))") }
        keyframePending = false
        guard size > 0, let nals, count > 0 else { return nil }
        // x264 lays the NAL payloads out back to back, start codes included (b_annexb).
        var bytes = Array(UnsafeBufferPointer(start: nals[0].p_payload, count: Int(size)))
        if config.h264Profile == .high {
            for i in 0..<Int(count) where nals[i].i_type == Int32(NAL_SPS.rawValue) {
                Self.markConstrainedHigh(&bytes, at: nals[0].p_payload.distance(to: nals[i].p_payload))
            }
        }
        let capture = ptsByIndex.removeValue(forKey: out.i_pts) ?? pts
        return EncodedAccessUnit(bytes: bytes, isKeyframe: out.b_keyframe != 0, pts: capture)
    }
}
