import Foundation
import Testing
import CastCore
import CastMedia
@testable import CastEncode

/// Bytes from a string of 0s and 1s (spaces and `//` comments ignored), zero-padded to a byte.
func bits(_ s: String) -> [UInt8] {
    let code = s.split(separator: "\n").map { $0.components(separatedBy: "//")[0] }.joined()
    let digits = code.filter { $0 == "0" || $0 == "1" }
    var out: [UInt8] = []
    for (i, c) in digits.enumerated() {
        if i % 8 == 0 { out.append(0) }
        if c == "1" { out[i / 8] |= 0x80 >> UInt8(i % 8) }
    }
    return out
}

@Suite struct RBSPWriterTests {
    @Test func expGolombCodesMatchTable9_2() {
        // H.264 Table 9-2: 0 → 1, 1 → 010, 2 → 011, 3 → 00100, 7 → 0001000, 8 → 0001001.
        var w = RBSPWriter()
        for v: UInt32 in [0, 1, 2, 3, 7, 8] { w.ue(v) }
        #expect(w.bitCount == 1 + 3 + 3 + 5 + 7 + 7)
        #expect(w.bytes == bits("1 010 011 00100 0001000 0001001"))
    }

    @Test func signedExpGolombMapsPositiveToOddCodeNumbers() {
        // Table 9-3: 0 → codeNum 0, 1 → 1, −1 → 2, 2 → 3, −2 → 4.
        var w = RBSPWriter()
        for v: Int32 in [0, 1, -1, 2, -2] { w.se(v) }
        #expect(w.bytes == bits("1 010 011 00100 00101"))
    }

    @Test func largestCodeNumberTakesSixtyFiveBits() {
        var w = RBSPWriter()
        w.ue(UInt32.max)  // 2^32 − 1: 32 zeros, then 2^32 in 33 bits
        #expect(w.bitCount == 65)
        #expect(w.bytes == [0, 0, 0, 0, 0x80, 0, 0, 0, 0])
    }

    @Test func fixedFieldsCrossByteBoundariesAndTrailingBitsAlign() {
        var w = RBSPWriter()
        w.u(3, 0b101)
        w.u(12, 0xabc)
        w.u(32, 0xdead_beef)
        #expect(w.bitCount == 47)
        w.trailingBits()
        #expect(w.isByteAligned)
        #expect(w.bytes == bits("101 101010111100 11011110101011011011111011101111 1"))
        var aligned = RBSPWriter()
        aligned.u(8, 0x42)
        aligned.trailingBits()  // a whole byte of stop bit + zeros
        #expect(aligned.bytes == [0x42, 0x80])
    }

    @Test func randomFieldsReadBackThroughAnIndependentReader() {
        // 2000 random u(n)/ue/se fields written, then parsed by the test's own reader (9.1's decoding rule).
        var rng: UInt64 = 0x2545_f491_4f6c_dd1d
        func next() -> UInt64 { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng }
        enum Field: Equatable { case u(Int, UInt32), ue(UInt32), se(Int32) }
        var fields: [Field] = []
        var w = RBSPWriter()
        for _ in 0..<2000 {
            let r = next()
            let bits = Int(r % 33)
            let v = UInt32(truncatingIfNeeded: next() >> UInt64(r % 32))
            switch (r >> 8) % 3 {
            case 0:
                let value = bits == 32 ? v : v & ((1 << UInt32(bits)) - 1)
                fields.append(.u(bits, value)); w.u(bits, value)
            case 1: fields.append(.ue(v)); w.ue(v)
            default:
                let sv = Int32(truncatingIfNeeded: v) / 2  // within ±2^30: se's range
                fields.append(.se(sv)); w.se(sv)
            }
        }
        var pos = 0
        func bit() -> UInt64 { defer { pos += 1 }; return UInt64(w.bytes[pos / 8] >> UInt8(7 - pos % 8) & 1) }
        func read(_ n: Int) -> UInt64 { (0..<n).reduce(0) { acc, _ in acc << 1 | bit() } }
        func readUE() -> UInt64 { var zeros = 0; while bit() == 0 { zeros += 1 }; return (1 << UInt64(zeros)) - 1 + read(zeros) }
        for f in fields {
            switch f {
            case let .u(n, v): #expect(read(n) == UInt64(v))
            case let .ue(v): #expect(readUE() == UInt64(v))
            case let .se(v):
                let k = readUE()
                #expect((k % 2 == 1 ? Int64((k + 1) / 2) : -Int64(k / 2)) == Int64(v))
            }
        }
        #expect(pos == w.bitCount)
    }

    @Test func emulationPreventionEscapesEveryZeroZeroLowByte() {
        // 7.4.1: 00 00 0x (x ≤ 3) becomes 00 00 03 0x; 00 00 04 stays; the count restarts after the 03.
        #expect(H264NAL.escape([0, 0, 0, 0, 0, 1, 0, 0, 2, 0, 0, 3, 0, 0, 4]) ==
                [0, 0, 3, 0, 0, 3, 0, 1, 0, 0, 3, 2, 0, 0, 3, 3, 0, 0, 4])
        #expect(H264NAL.escape([1, 0, 0]) == [1, 0, 0])
        #expect(H264NAL.annexB(.pps, refIdc: 3, rbsp: [0, 0, 1]) == [0, 0, 0, 1, 0x68, 0, 0, 3, 1])
    }
}

@Suite struct H264HeaderBytesTests {
    let p1080 = FrameSize(width: 1920, height: 1080)

    @Test func ppsForCavlcAndCabacAreTheWellKnownFourBytes() {
        // All-default PPS: ue 0, ue 0, entropy flag, 0, ue 0, ue 0, ue 0, 0, 00, se 0 ×3, 1, 0, 0, stop bit.
        #expect(H264PictureParameterSet(profile: .constrainedBaseline).annexB == [0, 0, 0, 1, 0x68, 0xce, 0x3c, 0x80])
        #expect(H264PictureParameterSet(profile: .main).annexB == [0, 0, 0, 1, 0x68, 0xee, 0x3c, 0x80])
    }

    @Test func spsFor1080p30ConstrainedBaselineIsExactlyTheSpecLayout() {
        let sps = H264SequenceParameterSet(size: p1080, frameRate: 30, profile: .constrainedBaseline)
        #expect(sps.widthInMbs == 120 && sps.heightInMbs == 68 && sps.cropBottom == 8 && sps.cropRight == 0)
        let expected = bits("""
            01000010 1 1 0000 00 00101000       // profile 66, set0 set1, level 40
            1 00101 011 010                     // sps id 0, log2_max_frame_num_minus4 4, poc type 2, 1 ref
            0 0000001111000 0000001000100       // no gaps, width 120−1, height 68−1
            1 1 1 1 1 1 00101                   // frame_mbs_only, direct8x8, cropping: 0, 0, 0, 4 (8 rows / 2)
            1                                   // vui present
            0 0 1 101 0 1 00000001 00000001 00000001   // no sar, no overscan, video signal: fmt 5, limited, 709 ×3
            0 1 00000000000000000000000000000001 00000000000000000000000000111100 0   // no chroma loc, timing 1/60, not fixed
            0 0 0 1 1 1 1 000010000 000010000 1 010   // no hrd, no pic_struct, restriction: mv, 0, 0, 15, 15, reorder 0, dpb 1
            1                                   // rbsp stop bit
            """)
        #expect(sps.rbsp == expected)
        // Two emulation prevention bytes, both in the VUI timing fields (00 00 00 01 and 00 00 00 3c).
        #expect(sps.annexB == [0, 0, 0, 1, 0x67] + H264NAL.escape(expected))
        #expect(sps.annexB.count == 5 + expected.count + 2)
    }

    @Test func idrAndPSliceHeadersHaveTheirExactBitLengths() {
        let sps = H264SequenceParameterSet(size: p1080, frameRate: 30, profile: .constrainedBaseline)
        let pps = H264PictureParameterSet(profile: .constrainedBaseline)
        let idr = H264SliceHeader(type: .i, isIDR: true, frameNum: 0, idrPicId: 1).packed(sps: sps, pps: pps)
        // first_mb 0, slice_type 2, pps 0, frame_num 0 (8 bits), idr_pic_id 1, no_output 0, long_term 0,
        // qp delta 0, deblocking idc 0, alpha 0, beta 0.
        #expect(idr.bytes == [0, 0, 0, 1, 0x65] + bits("1 011 1 00000000 010 0 0 1 1 1 1"))
        #expect(idr.bitLength == 40 + 22)
        let p = H264SliceHeader(type: .p, isIDR: false, frameNum: 5, idrPicId: 0, sliceQPDelta: -3).packed(sps: sps, pps: pps)
        // first_mb 0, slice_type 0, pps 0, frame_num 5, override 0, reorder 0, adaptive marking 0, qp −3, 0, 0, 0.
        #expect(p.bytes == [0, 0, 0, 1, 0x61] + bits("1 1 1 00000101 0 0 0 00111 1 1 1"))
        #expect(p.bitLength == 40 + 22)
        // CABAC adds cabac_init_idc to P slices only.
        let mainPPS = H264PictureParameterSet(profile: .main)
        #expect(H264SliceHeader(type: .p, isIDR: false, frameNum: 5, idrPicId: 0).packed(sps: sps, pps: mainPPS).bitLength
                == H264SliceHeader(type: .p, isIDR: false, frameNum: 5, idrPicId: 0).packed(sps: sps, pps: pps).bitLength + 1)
    }

    @Test func levelIsFortyFor1080p30AndThirtyOneFor720p30() {
        #expect(H264SequenceParameterSet(size: p1080, frameRate: 30, profile: .main).levelIdc == 40)
        #expect(H264SequenceParameterSet(size: FrameSize(width: 1280, height: 720), frameRate: 30, profile: .main).levelIdc == 31)
        let sps720 = H264SequenceParameterSet(size: FrameSize(width: 1280, height: 720), frameRate: 30, profile: .main)
        #expect(!sps720.hasCropping && sps720.visibleSize == FrameSize(width: 1280, height: 720))
    }
}

/// The headers read back by libavcodec's own H.264 syntax reader.
@Suite struct H264HeaderTraceTests {
    /// A picture whose slice data is trivial to write by hand, so the stream
    /// decodes fully: an IDR of Intra16x16 DC macroblocks with no residual
    /// (mid-grey, CAVLC), or a P picture of skipped macroblocks.
    static func picture(_ header: H264SliceHeader, sps: H264SequenceParameterSet, pps: H264PictureParameterSet) -> [UInt8] {
        precondition(!pps.cabac)
        var w = RBSPWriter()
        header.write(&w, sps: sps, pps: pps)
        writeTrivialSliceData(&w, type: header.type, macroblocks: sps.widthInMbs * sps.heightInMbs)
        return H264NAL.annexB(header.nalType, refIdc: 3, rbsp: w.bytes)
    }

    /// CAVLC slice data (7.3.4) then rbsp_slice_trailing_bits.
    static func writeTrivialSliceData(_ w: inout RBSPWriter, type: H264SliceHeader.SliceType, macroblocks: Int) {
        if type == .i {
            for _ in 0..<macroblocks {
                w.ue(3)  // mb_type I_16x16_2_0_0: DC prediction, no coded luma or chroma (Table 7-11)
                w.ue(0)  // intra_chroma_pred_mode: DC
                w.se(0)  // mb_qp_delta
                w.u(1, 1)  // Intra16x16DCLevel coeff_token, nC 0: TotalCoeff 0 (Table 9-5)
            }
        } else {
            w.ue(UInt32(macroblocks))  // mb_skip_run: every macroblock copies the reference
        }
        w.trailingBits()
    }

    @Test func spsAndPpsFor1080pBaselineReadBackFieldByField() throws {
        let sps = H264SequenceParameterSet(size: FrameSize(width: 1920, height: 1080), frameRate: 30, profile: .constrainedBaseline)
        let pps = H264PictureParameterSet(profile: .constrainedBaseline)
        let idr = H264SliceHeader(type: .i, isIDR: true, frameNum: 0, idrPicId: 0)
        let trace = try TraceHeaders.run(annexB: sps.annexB + pps.annexB + Self.picture(idr, sps: sps, pps: pps))
        let s = try #require(trace.all("Sequence Parameter Set").first, "\(trace.log)")
        let expected: [(String, Int)] = [
            ("profile_idc", 66), ("constraint_set0_flag", 1), ("constraint_set1_flag", 1), ("constraint_set2_flag", 0),
            ("level_idc", 40), ("log2_max_frame_num_minus4", 4), ("pic_order_cnt_type", 2), ("max_num_ref_frames", 1),
            ("pic_width_in_mbs_minus1", 119), ("pic_height_in_map_units_minus1", 67), ("frame_mbs_only_flag", 1),
            ("frame_cropping_flag", 1), ("frame_crop_right_offset", 0), ("frame_crop_bottom_offset", 4),
            ("video_signal_type_present_flag", 1), ("video_full_range_flag", 0), ("colour_description_present_flag", 1),
            ("colour_primaries", 1), ("transfer_characteristics", 1), ("matrix_coefficients", 1),
            ("timing_info_present_flag", 1), ("num_units_in_tick", 1), ("time_scale", 60), ("fixed_frame_rate_flag", 0),
            ("bitstream_restriction_flag", 1), ("max_num_reorder_frames", 0), ("max_dec_frame_buffering", 1),
        ]
        for (name, value) in expected { #expect(s[name] == value, "\(name)") }
        let p = try #require(trace.all("Picture Parameter Set").first)
        #expect(p["entropy_coding_mode_flag"] == 0)
        #expect(p["num_ref_idx_l0_default_active_minus1"] == 0)
        #expect(p["deblocking_filter_control_present_flag"] == 1)
        // ffprobe's reading of the same stream: Constrained Baseline, cropped to 1080 rows, BT.709 TV range.
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("castd-sps-\(getpid()).h264")
        defer { try? FileManager.default.removeItem(at: url) }
        try Data(sps.annexB + pps.annexB + Self.picture(idr, sps: sps, pps: pps)).write(to: url)
        let probe = try run("/usr/bin/ffprobe", ["-v", "error", "-show_streams", url.path])
        for line in ["profile=Constrained Baseline", "level=40", "width=1920", "height=1080", "color_range=tv",
                     "color_space=bt709", "color_primaries=bt709", "color_transfer=bt709", "has_b_frames=0"] {
            #expect(probe.contains(line), "\(line) in \(probe)")
        }
    }

    @Test func mainProfileHeadersWithCabacReadBack() throws {
        let sps = H264SequenceParameterSet(size: FrameSize(width: 1280, height: 720), frameRate: 30, profile: .main)
        let pps = H264PictureParameterSet(profile: .main)
        // The header, cabac_alignment_one_bits (7.3.4), then placeholder slice data: CBS reads headers, not CABAC data.
        var w = RBSPWriter()
        H264SliceHeader(type: .p, isIDR: false, frameNum: 9, idrPicId: 0, sliceQPDelta: 4).write(&w, sps: sps, pps: pps)
        while !w.isByteAligned { w.u(1, 1) }
        w.u(16, 0x5a5a)
        w.trailingBits()
        let slice = H264NAL.annexB(.nonIDRSlice, refIdc: 3, rbsp: w.bytes)
        let trace = try TraceHeaders.run(annexB: sps.annexB + pps.annexB + slice)
        let s = try #require(trace.all("Sequence Parameter Set").first, "\(trace.log)")
        #expect(s["profile_idc"] == 77)
        #expect(s["constraint_set0_flag"] == 0 && s["constraint_set1_flag"] == 0)
        #expect(s["level_idc"] == 31)
        #expect(s["frame_cropping_flag"] == 0)
        #expect(s["pic_height_in_map_units_minus1"] == 44)
        #expect(trace.all("Picture Parameter Set").first?["entropy_coding_mode_flag"] == 1)
        let h = try #require(trace.units.first { $0.fields.contains { $0.name == "first_mb_in_slice" } }, "\(trace.log)")
        #expect(h["slice_type"] == 0)
        #expect(h["frame_num"] == 9)
        #expect(h["cabac_init_idc"] == 0)
        #expect(h["slice_qp_delta"] == 4)
        #expect(h["adaptive_ref_pic_marking_mode_flag"] == 0)
    }

    @Test func streamOfOurHeadersDecodesWithFfmpegAcrossTwoIdrs() throws {
        // 320×180: 12 rows of cropping (192 coded). IDR, 3 P, IDR (next idr_pic_id), 2 P: 7 pictures.
        let size = FrameSize(width: 320, height: 180)
        let sps = H264SequenceParameterSet(size: size, frameRate: 30, profile: .constrainedBaseline)
        let pps = H264PictureParameterSet(profile: .constrainedBaseline)
        var stream: [UInt8] = []
        var slices: [H264SliceHeader] = []
        for (idrPicId, run) in [(0, 4), (1, 3)] {
            stream += sps.annexB + pps.annexB
            for n in 0..<run {
                let h = n == 0 ? H264SliceHeader(type: .i, isIDR: true, frameNum: 0, idrPicId: idrPicId)
                    : H264SliceHeader(type: .p, isIDR: false, frameNum: n, idrPicId: idrPicId)
                slices.append(h)
                stream += Self.picture(h, sps: sps, pps: pps)
            }
        }
        let (log, yuv) = try TraceHeaders.decode(annexB: stream)
        #expect(log.isEmpty, "ffmpeg: \(log)")
        #expect(yuv.count == 7 * size.pixelCount * 3 / 2)
        #expect(yuv.allSatisfy { $0 == 128 })  // DC prediction with no neighbours and no residual: mid-grey
        // The slice headers as libavcodec read them.
        let trace = try TraceHeaders.run(annexB: stream)
        let headers = trace.units.filter { $0.fields.contains { $0.name == "first_mb_in_slice" } }
        #expect(headers.map { $0["frame_num"] } == slices.map(\.frameNum))
        #expect(headers.map { $0["nal_unit_type"] } == [5, 1, 1, 1, 5, 1, 1])
        #expect(headers.compactMap { $0["idr_pic_id"] } == [0, 1])
    }
}

/// Where castd's SPS and x264's describe the same stream, they agree.
@Suite struct H264HeaderX264CrossCheckTests {
    @Test(arguments: [FrameSize(width: 1920, height: 1080), FrameSize(width: 1280, height: 720)])
    func ourSpsAgreesWithX264sOnTheSharedFields(size: FrameSize) throws {
        let config = EncoderConfig(size: size, frameRate: 30, bitrate: 2_500_000)
        let enc = try X264Encoder(config: config)
        let img = PlanarImage(format: .i420, size: size)
        let au = try #require(try enc.encode(img, pts: .zero))
        let x264SPS = try #require(AnnexB.nalUnits(au.bytes).first { $0[0] & 0x1f == 7 })
        let ours = H264SequenceParameterSet(size: size, frameRate: 30, profile: .constrainedBaseline)
        #expect(x264SPS[1] == 66)
        // ffmpeg traces packets, so each SPS goes with a picture.
        let theirs = try #require(try TraceHeaders.run(annexB: au.bytes).all("Sequence Parameter Set").first)
        let pps = H264PictureParameterSet(profile: .constrainedBaseline)
        let idr = H264HeaderTraceTests.picture(H264SliceHeader(type: .i, isIDR: true, frameNum: 0, idrPicId: 0), sps: ours, pps: pps)
        let mine = try #require(try TraceHeaders.run(annexB: ours.annexB + pps.annexB + idr).all("Sequence Parameter Set").first)
        // Left out on purpose: log2_max_frame_num (x264 picks its own), max_num_ref_frames and
        // max_dec_frame_buffering (preset), aspect ratio (x264 states 1:1), fixed_frame_rate_flag
        // (castd's pacer skips pictures), log2_max_mv_length (the search range of each encoder).
        let shared = ["profile_idc", "constraint_set0_flag", "constraint_set1_flag", "constraint_set2_flag", "level_idc",
                      "seq_parameter_set_id", "pic_order_cnt_type", "gaps_in_frame_num_allowed_flag",
                      "pic_width_in_mbs_minus1", "pic_height_in_map_units_minus1", "frame_mbs_only_flag",
                      "direct_8x8_inference_flag", "frame_cropping_flag", "frame_crop_left_offset", "frame_crop_right_offset",
                      "frame_crop_top_offset", "frame_crop_bottom_offset", "vui_parameters_present_flag",
                      "video_signal_type_present_flag", "video_full_range_flag", "colour_description_present_flag",
                      "colour_primaries", "transfer_characteristics", "matrix_coefficients",
                      "timing_info_present_flag", "num_units_in_tick", "time_scale", "nal_hrd_parameters_present_flag",
                      "vcl_hrd_parameters_present_flag", "bitstream_restriction_flag", "max_num_reorder_frames"]
        for name in shared {
            #expect(mine[name] == theirs[name], "\(name): castd \(String(describing: mine[name])), x264 \(String(describing: theirs[name]))")
        }
        #expect(mine["profile_idc"] == 66)  // not vacuous: both were read
    }
}
