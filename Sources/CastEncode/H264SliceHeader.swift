/// A slice header (H.264 7.3.3) for the pictures castd encodes: one slice per
/// picture, an IDR (I slice) or a P slice referring to the previous picture,
/// every picture a reference (nal_ref_idc 3), picture order type 2, so no
/// pic_order_cnt_lsb is sent.
///
/// ```
/// first_mb_in_slice ue | slice_type ue | pic_parameter_set_id ue | frame_num u(log2_max_frame_num)
/// [IDR] idr_pic_id ue
/// [P] num_ref_idx_active_override_flag u(1) | ref_pic_list_modification_flag_l0 u(1)
/// dec_ref_pic_marking: [IDR] no_output_of_prior_pics_flag u(1), long_term_reference_flag u(1)
///                      [non-IDR] adaptive_ref_pic_marking_mode_flag u(1)
/// [CABAC, P] cabac_init_idc ue | slice_qp_delta se
/// [deblocking control] disable_deblocking_filter_idc ue [≠ 1: slice_alpha_c0_offset_div2 se, slice_beta_offset_div2 se]
/// ```
struct H264SliceHeader: Equatable, Sendable {
    /// slice_type (Table 7-6); castd sends the 0…4 forms, as VA-API's slice parameter does.
    enum SliceType: UInt32, Sendable {
        case p = 0
        case i = 2
    }

    var type: SliceType
    var isIDR: Bool
    var firstMb = 0
    /// Counts reference pictures since the IDR, modulo MaxFrameNum (7.4.3); 0 on an IDR.
    var frameNum: Int
    /// Differs between two consecutive IDRs (7.4.3).
    var idrPicId: Int
    var sliceQPDelta = 0
    /// 0: the loop filter runs on every edge.
    var disableDeblockingFilterIdc = 0

    var nalType: H264NAL.UnitType { isIDR ? .idrSlice : .nonIDRSlice }

    /// The header's bits, not terminated: slice data follows directly.
    func write(_ w: inout RBSPWriter, sps: H264SequenceParameterSet, pps: H264PictureParameterSet) {
        precondition(!isIDR || type == .i, "an IDR picture has only I slices (7.4.1.2.4)")
        w.ue(UInt32(firstMb))
        w.ue(type.rawValue)
        w.ue(pps.id)
        w.u(sps.log2MaxFrameNum, UInt32(frameNum))
        if isIDR { w.ue(UInt32(idrPicId)) }
        // pic_order_cnt_type 2: nothing for the picture order count.
        if type == .p {
            w.flag(false)    // num_ref_idx_active_override_flag: the PPS default (one) holds
            w.flag(false)    // ref_pic_list_modification_flag_l0 (7.3.3.1): the previous picture is first
        }
        // dec_ref_pic_marking() (7.3.3.3), present since nal_ref_idc ≠ 0.
        if isIDR {
            w.flag(false)    // no_output_of_prior_pics_flag
            w.flag(false)    // long_term_reference_flag
        } else {
            w.flag(false)    // adaptive_ref_pic_marking_mode_flag: sliding window
        }
        if pps.cabac && type != .i { w.ue(0) }  // cabac_init_idc
        w.se(Int32(sliceQPDelta))
        if pps.deblockingFilterControlPresent {
            w.ue(UInt32(disableDeblockingFilterIdc))
            if disableDeblockingFilterIdc != 1 {
                w.se(0)      // slice_alpha_c0_offset_div2
                w.se(0)      // slice_beta_offset_div2
            }
        }
    }

    /// The packed slice header VA-API takes (VAEncPackedHeaderSlice): start
    /// code, NAL header and the header bits, escaped, with its exact length in
    /// bits; the driver appends the slice data.
    func packed(sps: H264SequenceParameterSet, pps: H264PictureParameterSet) -> (bytes: [UInt8], bitLength: Int) {
        var w = RBSPWriter()
        write(&w, sps: sps, pps: pps)
        let padding = (8 - w.bitCount % 8) % 8
        let bytes = H264NAL.annexB(nalType, refIdc: 3, rbsp: w.bytes)
        return (bytes, bytes.count * 8 - padding)
    }
}
