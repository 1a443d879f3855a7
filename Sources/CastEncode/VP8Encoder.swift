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
///
/// Every setting that costs CPU is in `Tuning`, chosen by measurement (docs/encoding.md,
/// "VP8 speed"; the sweep is `CASTD_BENCH=1 swift test --filter VP8SpeedBench`).
public final class VP8Encoder: VideoEncoder {
    public let kind = EncoderKind.libvpx
    public let inputFormat = PixelFormat.i420
    public private(set) var config: EncoderConfig
    public let tuning: Tuning

    /// The libvpx knobs that decide the encoder's CPU cost and its frame rate.
    public struct Tuning: Sendable, Equatable, CustomStringConvertible {
        /// `VP8E_SET_CPUUSED` (−16…16). Negative: that speed, fixed; positive: libvpx
        /// adapts the speed to the wall time a frame took, which on a shared machine
        /// follows other processes' load. On the busy 1080p screen the cost falls
        /// from −4 to about −10 and is flat beyond (docs/encoding.md, "VP8 speed").
        ///
        /// −10 is the fastest speed at which libvpx's real-time mode tries a motion
        /// search (NEWMV) on every macroblock: from −11 on it tries one in 4, from −12
        /// one in 8 (vp8/encoder/onyx_if.c, `vp8_set_speed_features`:
        /// `mode_check_freq_map_new1`, and the `Speed == 10` exception that maps −10 to
        /// the every-block rate of −9), and the other blocks only reuse their
        /// neighbours' vectors. On the busy 1080p field scrolled by two painter steps a
        /// frame (18, 10) at 4 Mbit/s, −12 missed the motion and spent 24.3 KB a frame
        /// (5.8 Mbit/s at 30 fps, luma PSNR 27.0 dB), −10 found it: 13.8 KB (3.3 Mbit/s,
        /// 30.6 dB), at about the same CPU (`VP8SpeedBench.motion`). A cast skips frames
        /// and lowers its frame rate under load, so the motion a frame is often two or
        /// three steps, not one. With −10, Firefox decoded 27.3–27.5 fps of that field
        /// under the 4 Mbit/s cap on a quiet machine (docs/encoding.md, "VP8 speed"). −6 also finds
        /// three steps (it predicts from the previous frame's vectors) for about 10 % more CPU.
        public var speed: Int32 = -10
        /// The speed at `lowFrameRateCeiling` fps and below, where the rate controller
        /// has lowered the frame rate for a narrow link: a frame then has two to three
        /// times the wall time, and the CPU a lower frame rate frees goes into
        /// libvpx's fuller search. Measured offline on the quality bench's contents
        /// (`castkit.bench.vp8_tuning`, 1080p, 1 and 2 Mbit/s, 10 and 15 fps): −6 against
        /// −10, PSNR-Y +0.8–0.9 dB on the video at 1 Mbit/s, −0.1…+0.3 on text and
        /// slides, for ~1.1× the CPU a frame — well under half of 30 fps's CPU a second
        /// (docs/quality.md, "VP8 for screen content").
        public var lowFrameRateSpeed: Int32 = -6
        /// The highest frame rate that gets `lowFrameRateSpeed` (the ladder's 15 fps step).
        public var lowFrameRateCeiling = 15
        /// `g_threads`. One: libvpx's VP8 row threads wait for each other by spinning
        /// (vp8/common/threading.h: `vp8_atomic_spin_wait`, no sleep on Linux), so on a
        /// busy 2-core machine two threads cost 4–9× the CPU of one and far more wall time.
        public var threads: UInt32 = 1
        /// `VP8E_SET_SCREEN_CONTENT_MODE`: 0 off, 1 screen content, 2 screen content
        /// with the aggressive rate control that drops frames after an overshoot.
        public var screenContentMode: UInt32 = 1
        /// `rc_dropframe_thresh` (buffer fullness %, 0 = never drop). 0: a frame is
        /// never dropped by libvpx; the frame rate is the rate controller's to lower
        /// (`RateLadder`), as for x264. With 30 a busy 1080p screen lost 50–80 % of
        /// its frames here (the 1.2–10 fps the receivers decoded).
        public var dropFrameThreshold: UInt32 = 0
        /// `rc_max_quantizer` (0…63). 63 lets CBR hold the target on noise-like
        /// content without dropping frames; calm screens never get near it.
        public var maxQuantizer: UInt32 = 63
        /// `VP8E_SET_STATIC_THRESHOLD`: blocks whose change is below it are skipped.
        public var staticThreshold: UInt32 = 1
        /// `VP8E_SET_NOISE_SENSITIVITY`: 0, no temporal denoiser (a screen has no noise).
        public var noiseSensitivity: Int32 = 0
        /// `VP8E_SET_TOKEN_PARTITIONS` (log2 of the count): 0, one partition.
        public var tokenPartitions: Int32 = 0
        /// `g_error_resilient`: a lost frame does not poison later ones' entropy state.
        public var errorResilient = true
        /// `VP8E_SET_MAX_INTRA_BITRATE_PCT`: a key frame may take at most 3 frames' worth
        /// of bits (libwebrtc's rule for CBR), so a PLI's answer does not stall the link.
        public var maxIntraBitratePct: UInt32 = 300
        /// The `deadline` of `vpx_codec_encode` in µs; 1 is `VPX_DL_REALTIME`.
        public var deadlineMicroseconds = UInt(castd_vpx_dl_realtime)

        public init() {}

        public var description: String {
            "cpu-used \(speed) (\(lowFrameRateSpeed) at ≤ \(lowFrameRateCeiling) fps), \(threads) thread\(threads == 1 ? "" : "s"), screen-content mode \(screenContentMode), "
                + "drop threshold \(dropFrameThreshold), max q \(maxQuantizer), static threshold \(staticThreshold)"
        }
    }

    /// libvpx's version ("v1.12.0"), for `castd doctor`.
    public static var libraryVersion: String { String(cString: vpx_codec_version_str()) }

    private var context = vpx_codec_ctx_t()
    private var cfg: vpx_codec_enc_cfg_t
    private var keyframePending = false
    /// The cpu-used libvpx has now: the tuning's speed for the current frame rate.
    public private(set) var speed: Int32
    /// The pts libvpx sees, in 90 kHz ticks: a frame clock that advances by one
    /// frame interval (at the rate controller's frame rate) per encoded frame,
    /// not the capture time. libvpx's VP8 rate control takes the frame rate from
    /// the pts steps (vp8/encoder/onyx_if.c, `vp8_get_compressed_data`: the
    /// duration since the last frame's end sets `vp8_new_framerate`), so a frame
    /// after a gap in capture times was given the whole gap's bits: on a loaded
    /// machine a slow frame left a gap, the next frame got 0.3–1 MB at 1080p
    /// (measured: 360 KB a frame, key frames to 983 KB), took longer still to
    /// encode, and the cast sank to 1 fps. libwebrtc's VP8 encoder steps its pts
    /// by 90 000 / frame rate the same way, and castd's x264 path gives frame
    /// indices with `b_vfr_input` 0. The gap is the capture side's to
    /// handle (the frame rate `RateLadder` sets), not a reason for a bigger frame.
    private var nextTick: Int64 = 0

    public init(config: EncoderConfig, tuning: Tuning = Tuning()) throws {
        guard config.size.width % 2 == 0, config.size.height % 2 == 0, config.size.width > 0, config.size.height > 0,
              config.size.width <= 16383, config.size.height <= 16383 else {
            // RFC 6386 §9.1: 14-bit sizes; 4:2:0 needs even sides.
            throw CastError(.encoder, "libvpx: picture size \(config.size) is not even or over VP8's 16383")
        }
        guard config.frameRate > 0, config.bitrate >= 1000 else {
            throw CastError(.encoder, "libvpx: frame rate \(config.frameRate) or bitrate \(config.bitrate) out of range")
        }
        guard (-16...16).contains(tuning.speed), (-16...16).contains(tuning.lowFrameRateSpeed), (1...64).contains(tuning.threads), tuning.screenContentMode <= 2,
              tuning.maxQuantizer <= 63, tuning.dropFrameThreshold <= 100, (0...3).contains(tuning.tokenPartitions),
              (0...6).contains(tuning.noiseSensitivity), tuning.deadlineMicroseconds >= 1 else {
            throw CastError(.encoder, "libvpx: tuning out of range (\(tuning))")
        }
        var c = vpx_codec_enc_cfg_t()
        guard vpx_codec_enc_config_default(castd_vpx_vp8_cx(), &c, 0) == VPX_CODEC_OK else {
            throw CastError(.encoder, "libvpx: no default VP8 configuration")
        }
        c.g_w = UInt32(config.size.width)
        c.g_h = UInt32(config.size.height)
        c.g_threads = tuning.threads
        // 90 kHz time base, as RTP's (RFC 7741 §4.1): pts are capture times.
        c.g_timebase = vpx_rational(num: 1, den: 90_000)
        c.g_pass = VPX_RC_ONE_PASS
        c.g_lag_in_frames = 0                  // no look-ahead: a frame in, its bits out
        c.g_error_resilient = tuning.errorResilient ? castd_vpx_error_resilient_default : 0
        c.rc_end_usage = VPX_CBR
        c.rc_resize_allowed = 0                // spec §7 maintainResolution
        c.rc_dropframe_thresh = tuning.dropFrameThreshold
        // CBR buffer as libwebrtc's real-time VP8: small, so no frame lags far behind.
        c.rc_min_quantizer = 2
        c.rc_max_quantizer = tuning.maxQuantizer
        c.rc_undershoot_pct = 100
        c.rc_overshoot_pct = 15
        c.rc_buf_initial_sz = 500
        c.rc_buf_optimal_sz = 600
        c.rc_buf_sz = 1000
        c.kf_mode = VPX_KF_DISABLED            // key frames only on request (VPX_EFLAG_FORCE_KF)
        Self.applyRate(&c, bitrate: config.bitrate)
        cfg = c
        self.config = config
        self.tuning = tuning
        speed = Self.speed(at: config.frameRate, tuning)
        let err = castd_vpx_enc_init(&context, &cfg)
        guard err == VPX_CODEC_OK else {
            throw CastError(.encoder, "libvpx: VP8 encoder init failed: \(String(cString: vpx_codec_err_to_string(err)))")
        }
        do {
            try control(VP8E_SET_CPUUSED, speed, "cpu-used")
            try control(VP8E_SET_SCREEN_CONTENT_MODE, tuning.screenContentMode, "screen-content mode")
            try control(VP8E_SET_NOISE_SENSITIVITY, tuning.noiseSensitivity, "noise sensitivity")
            try control(VP8E_SET_STATIC_THRESHOLD, tuning.staticThreshold, "static threshold")
            try control(VP8E_SET_TOKEN_PARTITIONS, tuning.tokenPartitions, "token partitions")
            try control(VP8E_SET_MAX_INTRA_BITRATE_PCT, tuning.maxIntraBitratePct, "max intra bitrate")
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

    /// The cpu-used for a frame rate: `lowFrameRateSpeed` up to `lowFrameRateCeiling` fps.
    static func speed(at framesPerSecond: Int, _ tuning: Tuning) -> Int32 {
        framesPerSecond <= tuning.lowFrameRateCeiling ? tuning.lowFrameRateSpeed : tuning.speed
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

    /// The next frame's step on libvpx's clock is one interval at this rate, so
    /// its rate control budgets bitrate / frame rate a frame; nothing to reopen.
    /// Crossing `lowFrameRateCeiling` changes the speed between frames.
    public func setFrameRate(_ framesPerSecond: Int) throws {
        guard framesPerSecond > 0 else { throw CastError(.encoder, "libvpx: frame rate must be positive") }
        let s = Self.speed(at: framesPerSecond, tuning)
        if s != speed {
            try control(VP8E_SET_CPUUSED, s, "cpu-used")
            speed = s
        }
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

        // One frame interval per frame on libvpx's clock (see `nextTick`), strictly increasing.
        let duration = Int64(max(1, 90_000 / config.frameRate))
        let tick = nextTick
        nextTick = tick &+ duration
        let flags: vpx_enc_frame_flags_t = keyframePending ? castd_vpx_eflag_force_kf : 0
        let err = vpx_codec_encode(&context, &img, vpx_codec_pts_t(tick), UInt(duration), flags, tuning.deadlineMicroseconds)
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
