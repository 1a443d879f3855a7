import CastMedia

/// The two H.264 profiles castd's own headers describe (Annex A.2).
enum H264Profile: Sendable {
    /// profile_idc 66 with constraint_set0 and constraint_set1: what every
    /// WebRTC receiver decodes (spec §7 prefers 42e01f); CAVLC only.
    case constrainedBaseline
    /// profile_idc 77, CABAC: better compression where the receiver takes it.
    case main

    var profileIdc: UInt8 { self == .main ? 77 : 66 }
    var usesCABAC: Bool { self == .main }
}

/// A sequence parameter set (H.264 7.3.2.1.1) for a progressive 4:2:0
/// 8-bit stream of P pictures only: picture order type 2 (the order is the
/// decoding order; no B-frames), one reference frame, BT.709 limited range in
/// the VUI, and a bitstream restriction saying no picture is ever reordered,
/// so a decoder may output each picture at once.
///
/// ```
/// profile_idc u(8) | constraint_set0..5 u(1)×6 | reserved_zero_2bits u(2) | level_idc u(8)
/// seq_parameter_set_id ue | log2_max_frame_num_minus4 ue | pic_order_cnt_type ue (= 2)
/// max_num_ref_frames ue | gaps_in_frame_num_value_allowed_flag u(1)
/// pic_width_in_mbs_minus1 ue | pic_height_in_map_units_minus1 ue | frame_mbs_only_flag u(1) (= 1)
/// direct_8x8_inference_flag u(1) | frame_cropping_flag u(1) [4 × ue] | vui_parameters_present_flag u(1) [vui]
/// rbsp_trailing_bits
/// ```
struct H264SequenceParameterSet: Equatable, Sendable {
    var profile: H264Profile
    var levelIdc: UInt8
    var id: UInt32 = 0
    /// frame_num counts reference pictures modulo 2^log2MaxFrameNum (7.4.3).
    var log2MaxFrameNum = 8
    var maxNumRefFrames = 1
    var widthInMbs: Int
    var heightInMbs: Int
    /// Luma pixels cropped off the right and bottom of the coded macroblock grid
    /// (1080 rows are coded as 1088).
    var cropRight: Int
    var cropBottom: Int
    /// The VUI timing: the frame rate the stream was opened with.
    var frameRate: Int

    // VUI colour description (E.2.1, ITU-T H.273): BT.709 primaries, transfer and
    // matrix at limited range, what PixelConverter produces.
    static let colourPrimaries: UInt32 = 1
    static let transferCharacteristics: UInt32 = 1
    static let matrixCoefficients: UInt32 = 1
    /// video_format 5: unspecified (E.2.1 Table E-2).
    static let videoFormat: UInt32 = 5
    /// The largest motion vector component in quarter-pixels is < 2^15 (E.2.1); the
    /// hardware's search range is not known here, so the loosest bound that level
    /// limits still give is stated.
    static let log2MaxMvLength: UInt32 = 15

    init(size: FrameSize, frameRate: Int, profile: H264Profile) {
        precondition(size.width > 0 && size.height > 0 && size.width % 2 == 0 && size.height % 2 == 0)
        self.profile = profile
        levelIdc = UInt8(Self.level(for: size, frameRate: frameRate))
        widthInMbs = (size.width + 15) / 16
        heightInMbs = (size.height + 15) / 16
        cropRight = widthInMbs * 16 - size.width
        cropBottom = heightInMbs * 16 - size.height
        self.frameRate = frameRate
    }

    /// H.264 Table A-1: level 3.1 allows 3600 macroblocks per frame and
    /// 108 000 per second (720p30); level 4.0 allows 8192 and 245 760 (1080p30).
    static func level(for size: FrameSize, frameRate: Int) -> Int {
        let mbs = ((size.width + 15) / 16) * ((size.height + 15) / 16)
        if mbs <= 3600 && mbs * frameRate <= 108_000 { return 31 }
        return 40
    }

    var visibleSize: FrameSize { FrameSize(width: widthInMbs * 16 - cropRight, height: heightInMbs * 16 - cropBottom) }
    var hasCropping: Bool { cropRight != 0 || cropBottom != 0 }
    /// VUI timing (E.2.1): a tick is half a frame (one field), so time_scale is twice the frame rate.
    var numUnitsInTick: UInt32 { 1 }
    var timeScale: UInt32 { UInt32(2 * frameRate) }

    var rbsp: [UInt8] {
        var w = RBSPWriter()
        w.u(8, UInt32(profile.profileIdc))
        // constraint_set0 (obeys A.2.1 Baseline) and constraint_set1 (obeys A.2.2
        // Main) together make Baseline "Constrained Baseline" (A.2.1.1); Main sets none.
        let constrained = profile == .constrainedBaseline
        w.flag(constrained)  // constraint_set0_flag
        w.flag(constrained)  // constraint_set1_flag
        w.u(4, 0)            // constraint_set2..5_flag
        w.u(2, 0)            // reserved_zero_2bits
        w.u(8, UInt32(levelIdc))
        w.ue(id)
        w.ue(UInt32(log2MaxFrameNum - 4))
        w.ue(2)              // pic_order_cnt_type: output order is decoding order
        w.ue(UInt32(maxNumRefFrames))
        w.flag(false)        // gaps_in_frame_num_value_allowed_flag
        w.ue(UInt32(widthInMbs - 1))
        w.ue(UInt32(heightInMbs - 1))
        w.flag(true)         // frame_mbs_only_flag: progressive frames
        w.flag(true)         // direct_8x8_inference_flag: only B_Skip/B_Direct use it, and there are no B slices
        w.flag(hasCropping)
        if hasCropping {
            // 7.4.2.1.1: for 4:2:0 frames CropUnitX = CropUnitY = 2.
            w.ue(0)
            w.ue(UInt32(cropRight / 2))
            w.ue(0)
            w.ue(UInt32(cropBottom / 2))
        }
        w.flag(true)         // vui_parameters_present_flag
        writeVUI(&w)
        w.trailingBits()
        return w.bytes
    }

    /// vui_parameters() (E.1.1).
    private func writeVUI(_ w: inout RBSPWriter) {
        w.flag(false)        // aspect_ratio_info_present_flag: square pixels by default
        w.flag(false)        // overscan_info_present_flag
        w.flag(true)         // video_signal_type_present_flag
        w.u(3, Self.videoFormat)
        w.flag(false)        // video_full_range_flag: limited range
        w.flag(true)         // colour_description_present_flag
        w.u(8, Self.colourPrimaries)
        w.u(8, Self.transferCharacteristics)
        w.u(8, Self.matrixCoefficients)
        w.flag(false)        // chroma_loc_info_present_flag
        w.flag(true)         // timing_info_present_flag
        w.u(32, numUnitsInTick)
        w.u(32, timeScale)
        // The pacer skips pictures of an unchanged screen and the rate can
        // change while streaming, so the frame rate is a maximum, not fixed.
        w.flag(false)        // fixed_frame_rate_flag
        w.flag(false)        // nal_hrd_parameters_present_flag
        w.flag(false)        // vcl_hrd_parameters_present_flag
        w.flag(false)        // pic_struct_present_flag
        w.flag(true)         // bitstream_restriction_flag
        w.flag(true)         // motion_vectors_over_pic_boundaries_flag
        w.ue(0)              // max_bytes_per_pic_denom: no limit
        w.ue(0)              // max_bits_per_mb_denom: no limit
        w.ue(Self.log2MaxMvLength)  // log2_max_mv_length_horizontal
        w.ue(Self.log2MaxMvLength)  // log2_max_mv_length_vertical
        w.ue(0)              // max_num_reorder_frames: nothing waits for a later picture
        w.ue(UInt32(maxNumRefFrames))  // max_dec_frame_buffering
    }

    /// The SPS NAL unit in Annex-B form (nal_ref_idc 3).
    var annexB: [UInt8] { H264NAL.annexB(.sps, refIdc: 3, rbsp: rbsp) }
}

/// A picture parameter set (H.264 7.3.2.2): one slice group, one active
/// reference, no weighted prediction, deblocking controllable per slice.
///
/// ```
/// pic_parameter_set_id ue | seq_parameter_set_id ue | entropy_coding_mode_flag u(1)
/// bottom_field_pic_order_in_frame_present_flag u(1) | num_slice_groups_minus1 ue
/// num_ref_idx_l0/l1_default_active_minus1 ue ue | weighted_pred_flag u(1) | weighted_bipred_idc u(2)
/// pic_init_qp_minus26 se | pic_init_qs_minus26 se | chroma_qp_index_offset se
/// deblocking_filter_control_present_flag u(1) | constrained_intra_pred_flag u(1)
/// redundant_pic_cnt_present_flag u(1) | rbsp_trailing_bits
/// ```
struct H264PictureParameterSet: Equatable, Sendable {
    var id: UInt32 = 0
    var spsId: UInt32 = 0
    /// CABAC (Main) or CAVLC (Baseline).
    var cabac: Bool
    /// The slice QP before slice_qp_delta (7.4.2.2), 26 as the neutral start.
    var picInitQP = 26
    var deblockingFilterControlPresent = true

    init(profile: H264Profile) { cabac = profile.usesCABAC }

    var rbsp: [UInt8] {
        var w = RBSPWriter()
        w.ue(id)
        w.ue(spsId)
        w.flag(cabac)
        w.flag(false)        // bottom_field_pic_order_in_frame_present_flag
        w.ue(0)              // num_slice_groups_minus1
        w.ue(0)              // num_ref_idx_l0_default_active_minus1: one reference
        w.ue(0)              // num_ref_idx_l1_default_active_minus1
        w.flag(false)        // weighted_pred_flag
        w.u(2, 0)            // weighted_bipred_idc
        w.se(Int32(picInitQP - 26))
        w.se(0)              // pic_init_qs_minus26
        w.se(0)              // chroma_qp_index_offset
        w.flag(deblockingFilterControlPresent)
        w.flag(false)        // constrained_intra_pred_flag
        w.flag(false)        // redundant_pic_cnt_present_flag
        w.trailingBits()
        return w.bytes
    }

    var annexB: [UInt8] { H264NAL.annexB(.pps, refIdc: 3, rbsp: rbsp) }
}
