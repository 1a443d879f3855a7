import Testing
import Foundation
import CastCore
import CastMedia
@testable import CastEncode

@Suite struct X264EncoderTests {
    let p720 = EncoderConfig(size: FrameSize(width: 1280, height: 720), frameRate: 30, bitrate: 2_500_000)

    func encodeBusy(_ enc: X264Encoder, frames: Range<Int>, busy: BusyFrames, img: PlanarImage,
                    keyframeAt: Set<Int> = []) throws -> [EncodedAccessUnit] {
        var out: [EncodedAccessUnit] = []
        for n in frames {
            busy.fill(img, frame: n)
            if keyframeAt.contains(n) { enc.requestKeyframe() }
            let au = try #require(try enc.encode(img, pts: Instant(nanoseconds: Int64(n) * 33_333_333)))
            out.append(au)
        }
        return out
    }

    @Test func firstAccessUnitIsSpsPpsThenIdrInConstrainedBaseline() throws {
        let enc = try X264Encoder(config: p720)
        let img = PlanarImage(format: .i420, size: p720.size)
        let busy = BusyFrames(size: p720.size)
        let aus = try encodeBusy(enc, frames: 0..<3, busy: busy, img: img)
        let nals = AnnexB.nalUnits(aus[0].bytes)
        let types = nals.map { $0[0] & 0x1f }
        #expect(types.first == 7, "SPS first: \(types)")
        #expect(types.dropFirst().first == 8, "then PPS: \(types)")
        #expect(types.contains(5))
        #expect(!types.contains(1))
        #expect(aus[0].isKeyframe)
        #expect(aus[0].pts == .zero)
        // SPS (H.264 7.3.2.1.1): profile_idc 66 (Baseline), constraint_set1_flag
        // set (→ Constrained Baseline, the 42e01f/42c01f family Chrome decodes), level_idc 31 at 720p30.
        let sps = nals[0]
        #expect(sps[1] == 66)
        #expect(sps[2] & 0x40 != 0)
        #expect(sps[3] == 31)
        // Later pictures: P slices only, no parameter sets, not keyframes.
        for au in aus.dropFirst() {
            #expect(AnnexB.types(au.bytes).allSatisfy { $0 == 1 || $0 == 6 })
            #expect(!au.isKeyframe)
        }
        // Sliced threads: one slice per thread, at most 4, in every picture.
        let slices = AnnexB.types(aus[1].bytes).filter { $0 == 1 }.count
        #expect(slices == X264Encoder.sliceThreads(cores: ProcessInfo.processInfo.activeProcessorCount))
        #expect(slices <= 4)
    }

    /// The negotiated profile (spec §7) is the one in the SPS of a real encode: High gives
    /// profile_idc 100 with constraint_set4 and 5 (progressive, no B-frames: Constrained High,
    /// the 640c1f castd offers) and CABAC in the PPS; Constrained Baseline gives 66 and CAVLC.
    @Test(arguments: [(H264ProfileLevel.high, UInt8(100), UInt8(0x0c), UInt8(1)),
                      (H264ProfileLevel.constrainedBaseline, UInt8(66), UInt8(0xc0), UInt8(0))])
    func theSPSCarriesTheNegotiatedProfile(profile: H264ProfileLevel, idc: UInt8, constraints: UInt8, cabac: UInt8) throws {
        var config = p720
        config.h264Profile = profile
        let enc = try X264Encoder(config: config)
        let img = PlanarImage(format: .i420, size: config.size)
        let aus = try encodeBusy(enc, frames: 0..<2, busy: BusyFrames(size: config.size), img: img)
        let nals = AnnexB.nalUnits(aus[0].bytes)
        let sps = try #require(nals.first { $0[0] & 0x1f == 7 })
        let pps = try #require(nals.first { $0[0] & 0x1f == 8 })
        #expect(sps[1] == idc)
        // constraint_set0..5 are the top six bits; the offer's profile-level-id byte 2 says which.
        #expect(sps[2] & 0xfc == constraints)
        #expect(H264ProfileLevel(profileLevelID: String(format: "%02x%02x1f", sps[1], sps[2])) == profile)
        // PPS: pic_parameter_set_id ue(v) = 0 and seq_parameter_set_id ue(v) = 0 are one bit
        // each ("1"), then entropy_coding_mode_flag (1: CABAC).
        #expect(pps[1] >> 6 == 0b11)
        #expect((pps[1] >> 5) & 1 == cabac)
    }

    /// x264 would put its worst-case bitstream buffers on 2 MiB huge pages (issue 7):
    /// opening an encoder turns transparent huge pages off for the process.
    @Test func openingAnEncoderTurnsTransparentHugePagesOff() throws {
        let enc = try X264Encoder(config: EncoderConfig(size: FrameSize(width: 320, height: 240), frameRate: 30,
                                                        bitrate: 500_000))
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        let line = status.split(separator: "\n").first { $0.hasPrefix("THP_enabled:") }
        #expect(line.map { $0.hasSuffix("0") } == true, "\(line ?? "no THP_enabled line")")
        _ = enc
    }

    @Test func levelIsFortyFor1080p30AndThirtyOneUpTo720p30() {
        #expect(X264Encoder.level(for: FrameSize(width: 1920, height: 1080), frameRate: 30) == 40)
        #expect(X264Encoder.level(for: FrameSize(width: 1280, height: 720), frameRate: 30) == 31)
        #expect(X264Encoder.level(for: FrameSize(width: 1366, height: 768), frameRate: 30) == 40)
    }

    @Test func keyframeOnDemandRepeatsParameterSetsAndNothingElseIsAnIdr() throws {
        let cfg = EncoderConfig(size: FrameSize(width: 320, height: 240), frameRate: 30, bitrate: 500_000)
        let enc = try X264Encoder(config: cfg)
        let img = PlanarImage(format: .i420, size: cfg.size)
        let aus = try encodeBusy(enc, frames: 0..<40, busy: BusyFrames(size: cfg.size), img: img, keyframeAt: [25])
        let keyframes = aus.indices.filter { aus[$0].isKeyframe }
        #expect(keyframes == [0, 25])  // infinite GOP, no scene-cut IDRs
        let t = AnnexB.types(aus[25].bytes)
        #expect(Array(t.prefix(2)) == [7, 8])
        #expect(t.contains(5))
    }

    @Test func streamDecodesWithFfprobeAsConstrainedBaselineBT709LimitedRange() throws {
        let cfg = EncoderConfig(size: FrameSize(width: 1920, height: 1080), frameRate: 30, bitrate: 4_000_000)
        let enc = try X264Encoder(config: cfg)
        let img = PlanarImage(format: .i420, size: cfg.size)
        let aus = try encodeBusy(enc, frames: 0..<3, busy: BusyFrames(size: cfg.size), img: img)
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("castd-x264-\(getpid()).h264")
        defer { try? FileManager.default.removeItem(at: url) }
        try Data(aus.flatMap(\.bytes)).write(to: url)
        let out = try run("/usr/bin/ffprobe", ["-v", "error", "-show_streams", "-count_frames", url.path])
        #expect(out.contains("profile=Constrained Baseline"), "\(out)")
        #expect(out.contains("level=40"))
        #expect(out.contains("width=1920"))
        #expect(out.contains("height=1080"))
        #expect(out.contains("color_range=tv"))
        #expect(out.contains("color_space=bt709"))
        #expect(out.contains("color_transfer=bt709"))
        #expect(out.contains("color_primaries=bt709"))
        #expect(out.contains("has_b_frames=0"))
        #expect(out.contains("nb_read_frames=3"))
    }

    @Test func bitrateStaysWithinTwentyPercentOfTargetOnBusyInputAndFollowsChanges() throws {
        let enc = try X264Encoder(config: p720)
        let img = PlanarImage(format: .i420, size: p720.size)
        let busy = BusyFrames(size: p720.size)
        // 3 s at 2.5 Mbps.
        let first = try encodeBusy(enc, frames: 0..<90, busy: busy, img: img)
        let rate1 = Double(first.reduce(0) { $0 + $1.bytes.count } * 8) / 3.0
        #expect(withinCap(rate1, of: 2_500_000), "measured \(Int(rate1)) bps for 2.5 Mbps")
        // Largest frame within a few frames' budget: the one-frame VBV holds.
        let biggest = first.dropFirst().map(\.bytes.count).max()!
        #expect(biggest * 8 <= 3 * 2_500_000 / 30, "largest P frame \(biggest) bytes")
        // Then 1 Mbps while running (x264_encoder_reconfig), 2 s.
        try enc.setBitrate(1_000_000)
        let second = try encodeBusy(enc, frames: 90..<150, busy: busy, img: img)
        let rate2 = Double(second.reduce(0) { $0 + $1.bytes.count } * 8) / 2.0
        #expect(withinCap(rate2, of: 1_000_000), "measured \(Int(rate2)) bps for 1 Mbps")
        #expect(enc.config.bitrate == 1_000_000)
    }

    @Test func frameRateChangeKeepsTheBitrateOverRealTime() throws {
        let enc = try X264Encoder(config: p720)
        let img = PlanarImage(format: .i420, size: p720.size)
        try enc.setFrameRate(15)
        // 3 s at 15 fps = 45 frames should still carry ≈ 2.5 Mbps.
        let aus = try encodeBusy(enc, frames: 0..<45, busy: BusyFrames(size: p720.size), img: img)
        let rate = Double(aus.reduce(0) { $0 + $1.bytes.count } * 8) / 3.0
        #expect(withinCap(rate, of: 2_500_000), "measured \(Int(rate)) bps at 15 fps")
        #expect(enc.config.frameRate == 15)
    }

    /// A still picture with one small changing block, well under budget: x264's ABR
    /// lowers the frame QP towards its minimum, and castd's minimum holds it there
    /// (with x264's default of 0 these P slices reach QP 0). Slice QPs read by ffmpeg.
    @Test func stillContentUnderBudgetStopsAtTheMinimumQP() throws {
        for minimum in [X264Encoder.defaultMinimumQP, 0] {
            let enc = try X264Encoder(config: p720, minimumQP: minimum)
            let img = PlanarImage(format: .i420, size: p720.size)
            BusyFrames(size: FrameSize(width: 1280, height: 720)).fill(img, frame: 0)
            memset(img.plane(0) + 128 * img.strides[0], 235, (720 - 128) * img.strides[0])   // most of it white
            var stream: [UInt8] = []
            for n in 0..<60 {
                for y in 0..<32 { memset(img.plane(0) + y * img.strides[0], Int32(n * 37 % 256), 32) }
                stream += try #require(try enc.encode(img, pts: Instant(nanoseconds: Int64(n) * 33_333_333))).bytes
            }
            let trace = try TraceHeaders.run(annexB: stream)
            let initQP = 26 + (try #require(trace.all("Picture Parameter Set").first?["pic_init_qp_minus26"]))
            let qps = trace.all("Slice Header").compactMap { $0["slice_qp_delta"].map { initQP + $0 } }
            #expect(qps.count >= 60)
            #expect(qps.min() == minimum, "minimum \(minimum): slice QPs \(qps)")
        }
    }

    /// Screen content is coded without the loop filter (X264Encoder: measured sharper for as many
    /// bits): every slice says disable_deblocking_filter_idc 1, in Constrained Baseline and in
    /// High, and the PPS lets slices say so. Slice headers read by ffmpeg.
    @Test func slicesAreCodedWithoutTheLoopFilter() throws {
        for profile in [H264ProfileLevel.constrainedBaseline, .high] {
            let enc = try X264Encoder(config: EncoderConfig(size: p720.size, frameRate: 30, bitrate: 2_000_000,
                                                            h264Profile: profile))
            let img = PlanarImage(format: .i420, size: p720.size)
            let busy = BusyFrames(size: p720.size)
            var stream: [UInt8] = []
            for n in 0..<10 {
                busy.fill(img, frame: n)
                stream += try #require(try enc.encode(img, pts: Instant(nanoseconds: Int64(n) * 33_333_333))).bytes
            }
            let trace = try TraceHeaders.run(annexB: stream)
            #expect(trace.all("Picture Parameter Set").first?["deblocking_filter_control_present_flag"] == 1)
            let idcs = trace.all("Slice Header").map { $0["disable_deblocking_filter_idc"] }
            #expect(idcs.count >= 10 && idcs.allSatisfy { $0 == 1 }, "\(profile): \(idcs)")
        }
    }

    /// A still screen becomes sharp (`StillRefinement`): a 1080p slide of glyph-like strokes
    /// replaced by another in one frame, then 45 still frames at 1 Mbit/s and 30 fps. With the
    /// one-frame rate buffer x264 spends a fraction of the budget on them and the page stays
    /// soft; with the refining buffer from the frame after the change it passes 45 dB PSNR-Y
    /// within 1.5 s (the "still screen" target at 1 Mbit/s), no frame over the buffer.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg")))
    func aStillPageSharpensWithinASecondAndAHalfWithTheRefiningRateBuffer() throws {
        let size = FrameSize(width: 1920, height: 1080)
        let config = EncoderConfig(size: size, frameRate: 30, bitrate: 1_000_000)
        let budget = config.bitrate / 8 / config.frameRate
        func page(_ seed: UInt64) -> PlanarImage {
            let img = PlanarImage(format: .i420, size: size)
            memset(img.plane(0), 235, img.strides[0] * size.height)
            memset(img.plane(1), 128, img.strides[1] * size.height / 2)
            memset(img.plane(2), 128, img.strides[2] * size.height / 2)
            var rng = SeededRandom(seed: seed)
            // A slide: ten lines 80 px apart, each up to 60 % of the width of 20 × 30 glyph
            // cells (a word gap now and then), each glyph two or three 3-px strokes.
            for line in stride(from: 140, to: size.height - 100, by: 80) {
                let end = 120 + Int(rng.next() % UInt64(size.width * 6 / 10 - 120))
                for cell in stride(from: 120, to: end, by: 20) where rng.next() % 6 != 0 {
                    for _ in 0..<(2 + Int(rng.next() % 2)) {
                        let vertical = rng.next() % 2 == 0
                        let x0 = cell + Int(rng.next() % 12), y0 = line + Int(rng.next() % 18)
                        let (w, h) = vertical ? (3, 10 + Int(rng.next() % 10)) : (6 + Int(rng.next() % 8), 3)
                        for y in y0..<min(y0 + h, size.height) { memset(img.plane(0) + y * img.strides[0] + x0, 16, w) }
                    }
                }
            }
            return img
        }
        let a = page(1), b = page(2)
        let checked = [30, 45]   // frames after the change: 1.0 s and 1.5 s
        func run(refiningFrames: Int) throws -> (psnr: [Double], largest: Int) {
            let enc = try X264Encoder(config: config)
            var stream: [UInt8] = []
            var largest = 0
            for n in 0..<(30 + 1 + checked.max()!) {
                if n == 31 { try enc.setRateBuffer(frames: refiningFrames) }
                let au = try #require(try enc.encode(n < 30 ? a : b, pts: Instant(nanoseconds: Int64(n) * 33_333_333)))
                if n > 30 { largest = max(largest, au.bytes.count) }
                stream += au.bytes
            }
            #expect(enc.rateBufferFrames == refiningFrames)
            let decoded = try TraceHeaders.decode(annexB: stream)
            #expect(decoded.log.isEmpty, "ffmpeg: \(decoded.log)")
            let frameBytes = size.width * size.height * 3 / 2
            let original = Array(UnsafeBufferPointer(start: b.plane(0), count: size.width * size.height))
            let psnr = checked.map { k -> Double in
                let at = (30 + k) * frameBytes
                guard decoded.yuv.count >= at + size.width * size.height else { return 0 }
                return PSNR.of(original, Array(decoded.yuv[at..<(at + size.width * size.height)]))
            }
            return (psnr, largest)
        }
        let tight = try run(refiningFrames: 1), refined = try run(refiningFrames: 3)
        print("castd-measure still-page 1080p 1Mbit/s: one-frame buffer \(tight.psnr) dB (largest \(tight.largest) B), "
              + "refining \(refined.psnr) dB (largest \(refined.largest) B), budget \(budget) B a frame")
        #expect(refined.psnr[1] >= 45, "refined: \(refined.psnr)")
        #expect(refined.psnr[1] > tight.psnr[1] + 3, "refined \(refined.psnr) against one-frame \(tight.psnr)")
        #expect(refined.largest <= 3 * budget, "largest refining frame \(refined.largest) B, budget \(budget) B")
    }

    @Test func oddSizeIsRefusedWithAnEncoderError() {
        #expect(throws: CastError.self) {
            try X264Encoder(config: EncoderConfig(size: FrameSize(width: 641, height: 480), frameRate: 30, bitrate: 1_000_000))
        }
    }
}

/// Spec §7 gives the bitrate as a maximum (maxBitrateBps), so the measured
/// rate may not exceed it by more than 5 % and must reach at least 80 % of it.
/// Measured here on busy input: 84–86 % with the one-frame VBV buffer (x264's
/// CBR undershoots with so small a buffer; 3–4 frames reach 96–100 %).
func withinCap(_ measured: Double, of target: Double) -> Bool {
    measured >= 0.8 * target && measured <= 1.05 * target
}

func run(_ path: String, _ args: [String]) throws -> String {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: path)
    p.arguments = args
    let pipe = Pipe()
    p.standardOutput = pipe
    p.standardError = pipe
    try p.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return String(decoding: data, as: UTF8.self)
}
