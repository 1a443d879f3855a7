import CastCore
import CastMedia
import CVPX
#if canImport(Glibc)
import Glibc
#endif

/// VP8 through libvpx, for receivers without H.264 (Firefox ESR, Chromium
/// built without proprietary codecs), set up like the x264 path: real time,
/// CBR, screen-content mode, error resilient, no lag, no internal resizing,
/// key frames only on request (PLI/FIR or a new viewer). One owner (the encode
/// thread); the codec context is freed in `deinit`.
public final class VP8Encoder: VideoEncoder {
    public let kind = EncoderKind.libvpx
    public let inputFormat = PixelFormat.i420
    public private(set) var config: EncoderConfig

    /// libvpx's speed for real-time VP8 (`VP8E_SET_CPUUSED`, −16…16; the
    /// magnitude is what counts in real-time mode, higher is faster). Not yet
    /// settled by a clean measurement: `ConvertEncodeBench.encodeVP8` sweeps
    /// −4…−12 at 1080p, but its only run so far was on a host loaded 9–17 on
    /// 2 cores, where every speed took 300–900 ms a frame (README, "VP8").
    public static let defaultSpeed: Int32 = -8
    /// Two encoder threads, as for x264's slice threads on a 2-core machine.
    public static let defaultThreads: UInt32 = 2

    /// libvpx's version ("v1.12.0"), for `castd doctor`.
    public static var libraryVersion: String { String(cString: vpx_codec_version_str()) }

    private var context = vpx_codec_ctx_t()
    private var cfg: vpx_codec_enc_cfg_t
    private var keyframePending = false
    private var firstPTS: Instant?
    private var lastPTS: Int64 = -1

    public init(config: EncoderConfig, speed: Int32 = VP8Encoder.defaultSpeed,
                threads: UInt32 = VP8Encoder.defaultThreads) throws {
        guard config.size.width % 2 == 0, config.size.height % 2 == 0, config.size.width > 0, config.size.height > 0,
              config.size.width <= 16383, config.size.height <= 16383 else {
            // RFC 6386 §9.1: 14-bit sizes; 4:2:0 needs even sides.
            throw CastError(.encoder, "libvpx: picture size \(config.size) is not even or over VP8's 16383")
        }
        guard config.frameRate > 0, config.bitrate >= 1000 else {
            throw CastError(.encoder, "libvpx: frame rate \(config.frameRate) or bitrate \(config.bitrate) out of range")
        }
        var c = vpx_codec_enc_cfg_t()
        guard vpx_codec_enc_config_default(castd_vpx_vp8_cx(), &c, 0) == VPX_CODEC_OK else {
            throw CastError(.encoder, "libvpx: no default VP8 configuration")
        }
        c.g_w = UInt32(config.size.width)
        c.g_h = UInt32(config.size.height)
        c.g_threads = threads
        // 90 kHz time base, as RTP's (RFC 7741 §4.1): pts are capture times.
        c.g_timebase = vpx_rational(num: 1, den: 90_000)
        c.g_pass = VPX_RC_ONE_PASS
        c.g_lag_in_frames = 0                  // no look-ahead: a frame in, its bits out
        c.g_error_resilient = castd_vpx_error_resilient_default   // a lost frame does not poison later ones' entropy state
        c.rc_end_usage = VPX_CBR
        c.rc_resize_allowed = 0                // spec §7 maintainResolution
        // Screen-content mode 2 (below) may drop the frame after one that overshot
        // badly (a scroll or a window switch can cost 20 frames' budget), as
        // libwebrtc's screen sharing does; without it a busy screen runs 40 % over.
        c.rc_dropframe_thresh = 30
        // CBR buffer as libwebrtc's real-time VP8: small, so no frame lags far behind.
        c.rc_min_quantizer = 2
        c.rc_max_quantizer = 56
        c.rc_undershoot_pct = 100
        c.rc_overshoot_pct = 15
        c.rc_buf_initial_sz = 500
        c.rc_buf_optimal_sz = 600
        c.rc_buf_sz = 1000
        c.kf_mode = VPX_KF_DISABLED            // key frames only on request (VPX_EFLAG_FORCE_KF)
        Self.applyRate(&c, bitrate: config.bitrate)
        cfg = c
        self.config = config
        let err = castd_vpx_enc_init(&context, &cfg)
        guard err == VPX_CODEC_OK else {
            throw CastError(.encoder, "libvpx: VP8 encoder init failed: \(String(cString: vpx_codec_err_to_string(err)))")
        }
        do {
            try control(VP8E_SET_CPUUSED, Int32(speed), "cpu-used")
            // 2: screen content with the aggressive rate control (re-encode or drop on overshoot).
            try control(VP8E_SET_SCREEN_CONTENT_MODE, UInt32(2), "screen-content mode")
            try control(VP8E_SET_NOISE_SENSITIVITY, Int32(0), "noise sensitivity")
            // Skip encoding of blocks that barely change (screen content: most of them).
            try control(VP8E_SET_STATIC_THRESHOLD, UInt32(1), "static threshold")
            // A key frame may take at most 3 frames' worth of bits (libwebrtc's rule of thumb
            // for CBR) so a PLI's answer does not stall the link for long.
            try control(VP8E_SET_MAX_INTRA_BITRATE_PCT, UInt32(300), "max intra bitrate")
        } catch {
            vpx_codec_destroy(&context)
            throw error
        }
    }

    deinit { vpx_codec_destroy(&context) }

    private func control(_ id: vp8e_enc_control_id, _ value: Int32, _ what: String) throws {
        let err = castd_vpx_control_int(&context, Int32(id.rawValue), value)
        guard err == VPX_CODEC_OK else { throw CastError(.encoder, "libvpx: \(what) \(value) refused (\(String(cString: vpx_codec_err_to_string(err))))") }
    }

    private func control(_ id: vp8e_enc_control_id, _ value: UInt32, _ what: String) throws {
        let err = castd_vpx_control_uint(&context, Int32(id.rawValue), value)
        guard err == VPX_CODEC_OK else { throw CastError(.encoder, "libvpx: \(what) \(value) refused (\(String(cString: vpx_codec_err_to_string(err))))") }
    }

    static func applyRate(_ c: inout vpx_codec_enc_cfg_t, bitrate: Int) {
        c.rc_target_bitrate = UInt32(max(1, (bitrate + 500) / 1000))   // kbit/s
    }

    public func requestKeyframe() { keyframePending = true }

    /// Live: libvpx takes a new target between frames (`vpx_codec_enc_config_set`).
    public func setBitrate(_ bitsPerSecond: Int) throws {
        guard bitsPerSecond >= 1000 else { throw CastError(.encoder, "libvpx: bitrate \(bitsPerSecond) out of range") }
        var c = cfg
        Self.applyRate(&c, bitrate: bitsPerSecond)
        let err = vpx_codec_enc_config_set(&context, &c)
        guard err == VPX_CODEC_OK else {
            throw CastError(.encoder, "libvpx: new bitrate \(bitsPerSecond) refused (\(String(cString: vpx_codec_err_to_string(err))))")
        }
        cfg = c
        config.bitrate = bitsPerSecond
    }

    /// Frames carry their capture time as pts and the interval as duration, so
    /// the rate control sees the real frame rate at once; nothing to reopen.
    public func setFrameRate(_ framesPerSecond: Int) throws {
        guard framesPerSecond > 0 else { throw CastError(.encoder, "libvpx: frame rate must be positive") }
        config.frameRate = framesPerSecond
    }

    public func encode(_ image: PlanarImage, pts: Instant) throws -> EncodedAccessUnit? {
        guard image.format == .i420, image.size == config.size else {
            throw CastError(.encoder, "libvpx: expected I420 \(config.size), got \(image.format) \(image.size)")
        }
        var img = vpx_image_t()
        img.fmt = VPX_IMG_FMT_I420
        img.cs = VPX_CS_BT_601   // EncoderChain converts with BT.601 for VP8 (RFC 6386 §9.2)
        img.range = VPX_CR_STUDIO_RANGE
        img.w = UInt32(image.size.width)
        img.h = UInt32(image.size.height)
        img.d_w = img.w
        img.d_h = img.h
        img.r_w = img.w
        img.r_h = img.h
        img.bit_depth = 8
        img.x_chroma_shift = 1
        img.y_chroma_shift = 1
        img.bps = 12
        img.planes = (image.plane(0), image.plane(1), image.plane(2), nil)
        img.stride = (Int32(image.strides[0]), Int32(image.strides[1]), Int32(image.strides[2]), 0)

        // pts in 90 kHz ticks since the first frame, strictly increasing (libvpx requires it).
        let origin = firstPTS ?? pts
        firstPTS = origin
        var tick = (pts.nanoseconds &- origin.nanoseconds) / 1_000_000_000 * 90_000
            + (pts.nanoseconds &- origin.nanoseconds) % 1_000_000_000 * 90_000 / 1_000_000_000
        if tick <= lastPTS { tick = lastPTS + 1 }
        lastPTS = tick
        let duration = UInt(max(1, 90_000 / config.frameRate))
        let flags: vpx_enc_frame_flags_t = keyframePending ? castd_vpx_eflag_force_kf : 0
        let err = vpx_codec_encode(&context, &img, vpx_codec_pts_t(tick), duration, flags, UInt(castd_vpx_dl_realtime))
        guard err == VPX_CODEC_OK else {
            throw CastError(.encoder, "libvpx: encode failed: \(String(cString: vpx_codec_err_to_string(err)))")
        }
        keyframePending = false
        // With no lag one frame goes in and at most one compressed frame comes out.
        var bytes: [UInt8] = []
        var isKey = false
        var iter: vpx_codec_iter_t? = nil
        while let pkt = vpx_codec_get_cx_data(&context, &iter) {
            guard pkt.pointee.kind == VPX_CODEC_CX_FRAME_PKT else { continue }
            let f = pkt.pointee.data.frame
            if let buf = f.buf, f.sz > 0 {
                bytes.append(contentsOf: UnsafeRawBufferPointer(start: buf, count: Int(f.sz)))
            }
            if f.flags & UInt32(castd_vpx_frame_is_key) != 0 { isKey = true }
        }
        guard !bytes.isEmpty else { return nil }
        return EncodedAccessUnit(bytes: bytes, isKeyframe: isKey, pts: pts)
    }
}
