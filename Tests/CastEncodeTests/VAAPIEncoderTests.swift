import Testing
import Foundation
import Glibc
import CastCore
import CastMedia
@testable import CastEncode

/// A VA layer without hardware: records what the encoder asks of it and
/// answers like a driver would, with the packed headers it was given (or its
/// own stand-in headers when it takes none) and one slice NAL.
final class FakeVASession: VAEncodeSession, @unchecked Sendable {  // one test thread uses it
    var capabilities: VAEncodeCapabilities
    var requests: [VAPictureRequest] = []
    var uploads = 0
    var failOnPicture: Int?

    init(profile: H264Profile = .constrainedBaseline, packed: VAPackedHeaderKinds = [.sequence, .picture, .slice]) {
        capabilities = VAEncodeCapabilities(profile: profile, lowPower: true, packedHeaders: packed, driver: "fake", node: "/dev/dri/fake")
    }

    func upload(_ image: PlanarImage) throws { uploads += 1 }

    func encode(_ picture: VAPictureRequest) throws -> [UInt8] {
        if requests.count == failOnPicture {
            throw CastError(.encoder, "VA-API: vaEndPicture failed on /dev/dri/fake (driver fake): internal error (status 1)")
        }
        requests.append(picture)
        var out: [UInt8] = []
        for h in picture.packedHeaders where h.kind != .slice { out += h.bytes }
        if let slice = picture.packedHeaders.first(where: { $0.kind == .slice }) {
            out += slice.bytes + [0x80]
        } else {
            out += [0, 0, 0, 1, picture.slice.isIDR ? 0x65 : 0x41, 0x80]
        }
        return out
    }
}

@Suite struct VAAPIEncoderTests {
    let config = EncoderConfig(size: FrameSize(width: 1920, height: 1080), frameRate: 30, bitrate: 4_000_000)

    func encode(_ enc: VAAPIEncoder, _ n: Int, keyframeAt: Set<Int> = [], before: (Int) throws -> Void = { _ in }) throws -> [EncodedAccessUnit] {
        let img = PlanarImage(format: .nv12, size: enc.config.size)
        var out: [EncodedAccessUnit] = []
        for i in 0..<n {
            try before(i)
            if keyframeAt.contains(i) { enc.requestKeyframe() }
            out.append(try #require(try enc.encode(img, pts: Instant(nanoseconds: Int64(i)))))
        }
        return out
    }

    @Test func firstPictureIsAnIdrWithSequenceBufferPackedParameterSetsAndRateBuffers() throws {
        let fake = FakeVASession()
        let enc = try VAAPIEncoder(config: config, session: fake)
        let aus = try encode(enc, 4)
        #expect(fake.uploads == 4)
        let r = fake.requests
        #expect(r[0].slice.isIDR && r[0].slice.type == .i)
        #expect(r[0].slice.idrPicId == 0 && r[0].slice.frameNum == 0 && r[0].pictureOrderCount == 0)
        #expect(r[0].sequence == H264SequenceParameterSet(size: config.size, frameRate: 30, profile: .constrainedBaseline))
        #expect(r[0].reference == nil)
        #expect(r[0].packedHeaders.map(\.kind) == [.sequence, .picture, .slice])
        // CBR at 4 Mbps, a one-frame buffer (4 000 000 / 30) 90 % full, 30 fps.
        #expect(r[0].misc == [.rateControl(bitsPerSecond: 4_000_000, windowMilliseconds: 33),
                              .hrd(bufferSize: 133_333, initialFullness: 119_999), .frameRate(30)])
        #expect(aus[0].isKeyframe)
        #expect(AnnexB.types(aus[0].bytes) == [7, 8, 5])
        #expect(aus[0].bytes.starts(with: r[0].sequence!.annexB + r[0].pps.annexB))
        // Then P pictures: frame_num counts, the two reconstructed surfaces take turns, each refers to the last.
        #expect(r.map(\.slice.type) == [.i, .p, .p, .p])
        #expect(r.map(\.slice.frameNum) == [0, 1, 2, 3])
        #expect(r.map(\.pictureOrderCount) == [0, 2, 4, 6])
        #expect(r.map(\.reconstructed) == [0, 1, 0, 1])
        #expect(r.map(\.reference) == [nil, 0, 1, 0])
        #expect(r.dropFirst().map(\.referencePictureOrderCount) == [0, 2, 4])
        #expect(r.dropFirst().map(\.referenceFrameNum) == [0, 1, 2])
        for p in r.dropFirst() {
            #expect(p.sequence == nil)
            #expect(p.misc.isEmpty)
            #expect(p.packedHeaders.map(\.kind) == [.slice])
        }
        #expect(aus.dropFirst().allSatisfy { !$0.isKeyframe && AnnexB.types($0.bytes) == [1] })
        #expect(aus.map(\.pts.nanoseconds) == [0, 1, 2, 3])
    }

    @Test func keyframeOnDemandRestartsFrameNumWithTheNextIdrPicId() throws {
        let fake = FakeVASession()
        let enc = try VAAPIEncoder(config: config, session: fake)
        let aus = try encode(enc, 8, keyframeAt: [3, 6, 7])
        let r = fake.requests
        #expect(aus.map(\.isKeyframe) == [true, false, false, true, false, false, true, true])
        #expect(r.map(\.slice.frameNum) == [0, 1, 2, 0, 1, 2, 0, 0])
        // Consecutive IDRs differ in idr_pic_id (7.4.3).
        #expect(r.filter(\.slice.isIDR).map(\.slice.idrPicId) == [0, 1, 2, 3])
        #expect(r.map(\.pictureOrderCount) == [0, 2, 4, 0, 2, 4, 0, 0])
        #expect(r[4].reference == r[3].reconstructed)
        #expect(r[3].sequence != nil && r[3].misc.count == 3)
        #expect(AnnexB.types(aus[3].bytes) == [7, 8, 5])
        #expect(AnnexB.types(aus[4].bytes) == [1])
    }

    @Test func bitrateAndFrameRateChangesSendMiscBuffersWithTheNextPictureOnly() throws {
        let fake = FakeVASession()
        let enc = try VAAPIEncoder(config: config, session: fake)
        _ = try encode(enc, 6) { i in
            if i == 2 { try enc.setBitrate(1_000_000) }
            if i == 4 { try enc.setFrameRate(15) }
        }
        let r = fake.requests
        #expect(r[2].misc == [.rateControl(bitsPerSecond: 1_000_000, windowMilliseconds: 33),
                              .hrd(bufferSize: 33_333, initialFullness: 29_999), .frameRate(30)])
        #expect(r[2].sequence == nil && !r[2].slice.isIDR)  // no IDR for a rate change
        #expect(r[3].misc.isEmpty)
        #expect(r[4].misc == [.rateControl(bitsPerSecond: 1_000_000, windowMilliseconds: 66),
                              .hrd(bufferSize: 66_666, initialFullness: 59_999), .frameRate(15)])
        #expect(r[5].misc.isEmpty)
        #expect(enc.config.bitrate == 1_000_000 && enc.config.frameRate == 15)
        #expect(throws: CastError.self) { try enc.setBitrate(0) }
        #expect(throws: CastError.self) { try enc.setFrameRate(0) }
    }

    @Test func driverWithoutPackedHeadersGetsNoneAndTheIdrStillCarriesSpsAndPps() throws {
        let fake = FakeVASession(packed: [])
        let enc = try VAAPIEncoder(config: config, session: fake)
        let aus = try encode(enc, 3)
        #expect(fake.requests.allSatisfy { $0.packedHeaders.isEmpty })
        #expect(AnnexB.types(aus[0].bytes) == [7, 8, 5])
        #expect(aus[0].bytes.starts(with: enc.sps.annexB + enc.pps.annexB))
        #expect(AnnexB.types(aus[1].bytes) == [1])
    }

    @Test func mainProfileDriverGetsCabacHeaders() throws {
        let fake = FakeVASession(profile: .main)
        let enc = try VAAPIEncoder(config: config, session: fake)
        _ = try encode(enc, 2)
        #expect(fake.requests[0].sequence?.profile == .main)
        #expect(fake.requests[0].pps.cabac)
        #expect(enc.sps.annexB[5] == 77)
    }

    @Test func frameNumWrapsAtMaxFrameNumWithoutAnIdr() throws {
        let small = EncoderConfig(size: FrameSize(width: 32, height: 32), frameRate: 30, bitrate: 100_000)
        let fake = FakeVASession()
        let enc = try VAAPIEncoder(config: small, session: fake)
        let aus = try encode(enc, 258)
        let r = fake.requests
        #expect(enc.sps.log2MaxFrameNum == 8)
        #expect(r[255].slice.frameNum == 255 && r[256].slice.frameNum == 0 && r[257].slice.frameNum == 1)
        #expect(!r[256].slice.isIDR && r[256].pictureOrderCount == 512)  // POC type 2 keeps counting (8.2.1.3)
        #expect(aus.filter(\.isKeyframe).count == 1)
    }

    @Test func aFailedPictureIsAnErrorThatNamesTheCallAndChangesNoState() throws {
        let fake = FakeVASession()
        fake.failOnPicture = 2
        let enc = try VAAPIEncoder(config: config, session: fake)
        _ = try encode(enc, 2)
        let img = PlanarImage(format: .nv12, size: config.size)
        #expect { try enc.encode(img, pts: .zero) } throws: {
            ($0 as? CastError)?.code == .encoder && "\($0)".contains("vaEndPicture failed")
        }
        fake.failOnPicture = nil
        _ = try enc.encode(img, pts: .zero)
        #expect(fake.requests.last?.slice.frameNum == 2)
        #expect(fake.requests.last?.reference == fake.requests[1].reconstructed)
    }

    @Test func wrongPictureFormatOrSizeIsRefused() throws {
        let enc = try VAAPIEncoder(config: config, session: FakeVASession())
        #expect(throws: CastError.self) { try enc.encode(PlanarImage(format: .i420, size: config.size), pts: .zero) }
        #expect(throws: CastError.self) { try enc.encode(PlanarImage(format: .nv12, size: FrameSize(width: 64, height: 64)), pts: .zero) }
        #expect(throws: CastError.self) {
            try VAAPIEncoder(config: EncoderConfig(size: FrameSize(width: 641, height: 480), frameRate: 30, bitrate: 1_000_000),
                             session: FakeVASession())
        }
    }

    @Test func chainFallsBackFromAFailingVaapiEncoderToX264WithAnIdr() throws {
        let small = EncoderConfig(size: FrameSize(width: 64, height: 32), frameRate: 30, bitrate: 500_000)
        let fake = FakeVASession()
        fake.failOnPicture = 2
        let log = LogLines()
        let table = [
            EncoderCandidate(kind: .vaapi) { try VAAPIEncoder(config: $0, session: fake) },
            EncoderCandidate(kind: .x264) { try X264Encoder(config: $0) },
        ]
        let chain = EncoderChain(preference: .auto, config: small, table: table, log: log.append)
        try chain.start()
        #expect(chain.current?.kind == .vaapi)
        var keyframes: [Bool] = []
        for n in 0..<4 {
            let slot = MemorySlot(capacity: 64 * 4 * 32)
            slot.bytes.initializeMemory(as: UInt8.self, repeating: 200, count: 64 * 4 * 32)
            let frame = Frame(format: .bgrx, size: small.size, stride: 256, captureTime: Instant(nanoseconds: Int64(n)))
            keyframes.append(try #require(try chain.encode(pixels: slot.bytes, frame: frame)).isKeyframe)
        }
        #expect(keyframes == [true, false, true, false])
        #expect(chain.current?.kind == .x264)
        #expect(log.all.contains {
            $0.event == "encoder_fallback" && $0["from"] == "vaapi" && $0["to"] == "x264"
                && $0["reason"]?.hasPrefix("VA-API: vaEndPicture failed") == true
        })
    }
}

/// The real libva session on things that are not render nodes: clean errors, nothing crashes.
@Suite struct LibVAEncodeSessionErrorTests {
    let config = EncoderConfig(size: FrameSize(width: 1280, height: 720), frameRate: 30, bitrate: 2_500_000)

    func claimedUsable(_ path: String) -> VAAPIProbe {
        VAAPIProbe(nodes: [VAAPIProbe.Node(path: path, driver: "test", h264Encode: ["ConstrainedBaseline/EncSliceLP"], problem: nil)])
    }

    @Test func missingNodeIsASentenceNamingItAndTheReason() {
        #expect { try VAAPIEncoder(config: config, probe: claimedUsable("/nonexistent-castd/renderD128")) } throws: {
            ($0 as? CastError)?.code == .encoderUnavailable
                && "\($0)" == "VA-API: cannot open /nonexistent-castd/renderD128 (No such file or directory)"
        }
    }

    @Test func fileThatIsNotADrmDeviceFailsInLibvaWithTheCallNamed() throws {
        let path = "/tmp/castd-fake-render-\(getpid())"
        let fd = open(path, O_CREAT | O_RDWR, 0o600)
        close(fd)
        defer { unlink(path) }
        #expect { try VAAPIEncoder(config: config, probe: claimedUsable(path)) } throws: { error in
            let s = "\(error)"
            return error is CastError && s.hasPrefix("VA-API: ") && s.contains(path)
                && (s.contains("vaInitialize failed") || s.contains("vaGetDisplayDRM failed"))
        }
    }
}

/// The Swift values → libva parameter structs, checked field by field (the
/// part of the real path that runs without a device).
@Suite struct LibVAParameterBufferTests {
    let sps = H264SequenceParameterSet(size: FrameSize(width: 1920, height: 1080), frameRate: 30, profile: .constrainedBaseline)
    let surfaces: [UInt32] = [10, 11, 12]

    func request(idr: Bool) -> VAPictureRequest {
        VAPictureRequest(sequence: idr ? sps : nil, bitsPerSecond: 4_000_000, pps: H264PictureParameterSet(profile: .constrainedBaseline),
                         slice: H264SliceHeader(type: idr ? .i : .p, isIDR: idr, frameNum: idr ? 0 : 5, idrPicId: 3),
                         pictureOrderCount: idr ? 0 : 10, reconstructed: 1, reference: idr ? nil : 0,
                         referencePictureOrderCount: 8, referenceFrameNum: 4, packedHeaders: [], misc: [])
    }

    @Test func sequenceBufferDescribesTheSameStreamAsOurSps() {
        let s = LibVAEncodeSession.sequenceBuffer(sps, bitsPerSecond: 4_000_000)
        #expect(s.level_idc == 40)
        #expect(s.picture_width_in_mbs == 120 && s.picture_height_in_mbs == 68)
        #expect(s.frame_cropping_flag == 1 && s.frame_crop_bottom_offset == 4 && s.frame_crop_right_offset == 0)
        #expect(s.seq_fields.bits.pic_order_cnt_type == 2)
        #expect(s.seq_fields.bits.log2_max_frame_num_minus4 == 4)
        #expect(s.seq_fields.bits.frame_mbs_only_flag == 1 && s.seq_fields.bits.chroma_format_idc == 1)
        #expect(s.max_num_ref_frames == 1 && s.ip_period == 1)
        #expect(s.bits_per_second == 4_000_000)
        #expect(s.num_units_in_tick == 1 && s.time_scale == 60)
        #expect(s.vui_fields.bits.timing_info_present_flag == 1 && s.vui_fields.bits.bitstream_restriction_flag == 1)
    }

    @Test func pPictureRefersToTheOtherReconstructedSurface() {
        let r = request(idr: false)
        let p = LibVAEncodeSession.pictureBuffer(r, surfaces: surfaces, codedBuffer: 99)
        #expect(p.CurrPic.picture_id == 12 && p.CurrPic.frame_idx == 5 && p.CurrPic.TopFieldOrderCnt == 10)
        #expect(p.ReferenceFrames.0.picture_id == 11 && p.ReferenceFrames.0.frame_idx == 4)
        #expect(p.ReferenceFrames.0.TopFieldOrderCnt == 8)
        #expect(p.ReferenceFrames.0.flags == 0x08)  // VA_PICTURE_H264_SHORT_TERM_REFERENCE
        #expect(p.ReferenceFrames.1.picture_id == 0xffff_ffff && p.ReferenceFrames.15.flags == 0x01)  // invalid
        #expect(p.coded_buf == 99 && p.frame_num == 5)
        #expect(p.pic_fields.bits.idr_pic_flag == 0 && p.pic_fields.bits.reference_pic_flag == 1)
        #expect(p.pic_fields.bits.entropy_coding_mode_flag == 0)
        let s = LibVAEncodeSession.sliceBuffer(r, widthInMbs: 120, heightInMbs: 68, surfaces: surfaces)
        #expect(s.num_macroblocks == 8160 && s.slice_type == 0 && s.idr_pic_id == 3)
        #expect(s.RefPicList0.0.picture_id == 11 && s.RefPicList0.1.picture_id == 0xffff_ffff)
        #expect(s.RefPicList1.0.picture_id == 0xffff_ffff)
    }

    @Test func idrPictureHasNoReferenceAndTheIdrFlag() {
        let r = request(idr: true)
        let p = LibVAEncodeSession.pictureBuffer(r, surfaces: surfaces, codedBuffer: 99)
        #expect(p.pic_fields.bits.idr_pic_flag == 1)
        #expect(p.ReferenceFrames.0.picture_id == 0xffff_ffff)
        let s = LibVAEncodeSession.sliceBuffer(r, widthInMbs: 120, heightInMbs: 68, surfaces: surfaces)
        #expect(s.slice_type == 2 && s.RefPicList0.0.picture_id == 0xffff_ffff)
    }

    @Test func rateControlIsCbrThatNeverSkipsAPicture() {
        let rc = LibVAEncodeSession.rateControl(bitsPerSecond: 2_500_000, windowMilliseconds: 33)
        #expect(rc.bits_per_second == 2_500_000 && rc.target_percentage == 100 && rc.window_size == 33)
        #expect(rc.rc_flags.bits.disable_frame_skip == 1)
    }
}

@Suite struct VASurfaceUploadTests {
    @Test func pictureIsCopiedAtThePitchesAndItsEdgesFillTheMacroblockPadding() {
        // 6×4 NV12 into a 16×16 coded surface with pitch 20 and the UV plane at offset 400.
        let img = PlanarImage(format: .nv12, size: FrameSize(width: 6, height: 4))
        for y in 0..<4 { for x in 0..<6 { img.plane(0)[y * img.strides[0] + x] = UInt8(10 * y + x) } }
        for y in 0..<2 { for x in 0..<6 { img.plane(1)[y * img.strides[1] + x] = UInt8(100 + 10 * y + x) } }
        var mem = [UInt8](repeating: 0xee, count: 400 + 20 * 8)
        mem.withUnsafeMutableBytes { raw in
            LibVAEncodeSession.writePadded(img, to: raw.baseAddress!, pitches: (20, 20), offsets: (0, 400),
                                           coded: FrameSize(width: 16, height: 16))
        }
        #expect(Array(mem[0..<16]) == [0, 1, 2, 3, 4, 5] + [UInt8](repeating: 5, count: 10))
        #expect(Array(mem[16..<20]) == [0xee, 0xee, 0xee, 0xee])  // beyond the coded width: untouched
        #expect(Array(mem[60..<66]) == [30, 31, 32, 33, 34, 35])  // row 3
        #expect(Array(mem[300..<316]) == Array(mem[60..<76]))       // row 15 repeats row 3
        #expect(Array(mem[400..<416]) == [100, 101, 102, 103, 104, 105] + [UInt8]([104, 105]).repeated(5))
        #expect(Array(mem[540..<556]) == Array(mem[420..<436]))     // UV row 7 repeats UV row 1
    }
}

extension Array {
    func repeated(_ n: Int) -> [Element] { (0..<n).flatMap { _ in self } }
}

/// A fake driver that honours packed headers the way va.h describes them: it
/// emits the packed SPS/PPS as given, and continues the packed slice header
/// at its exact bit length with slice data of its own (trivial CAVLC data a
/// test can write). So the whole stream VAAPIEncoder makes can be decoded.
final class SliceWritingFakeSession: VAEncodeSession, @unchecked Sendable {  // one test thread uses it
    let capabilities = VAEncodeCapabilities(profile: .constrainedBaseline, lowPower: true,
                                            packedHeaders: [.sequence, .picture, .slice], driver: "fake", node: "/dev/dri/fake")
    private var macroblocks = 0

    func upload(_ image: PlanarImage) throws {}

    func encode(_ picture: VAPictureRequest) throws -> [UInt8] {
        if let sps = picture.sequence { macroblocks = sps.widthInMbs * sps.heightInMbs }
        var out: [UInt8] = []
        for h in picture.packedHeaders where h.kind != .slice { out += h.bytes }
        let header = try #require(picture.packedHeaders.first { $0.kind == .slice })
        // Start code and NAL header as they are; the payload unescaped and cut at bitLength.
        let rbsp = Self.unescape(Array(header.bytes.dropFirst(5)))
        var w = RBSPWriter()
        for i in 0..<(header.bitLength - 40) { w.u(1, UInt32(rbsp[i / 8] >> UInt8(7 - i % 8) & 1)) }
        H264HeaderTraceTests.writeTrivialSliceData(&w, type: picture.slice.type, macroblocks: macroblocks)
        return out + Array(header.bytes.prefix(5)) + H264NAL.escape(w.bytes)
    }

    /// Removes emulation prevention bytes (the 03 of 00 00 03), written here independently of H264NAL.
    static func unescape(_ b: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var zeros = 0
        for x in b {
            if zeros >= 2 && x == 3 { zeros = 0; continue }
            out.append(x)
            zeros = x == 0 ? zeros + 1 : 0
        }
        return out
    }
}

@Suite struct VAAPIEncoderStreamTests {
    @Test func wholeStreamWithKeyframesOnDemandDecodesWithFfmpeg() throws {
        // 320×180 (cropped from 192 rows), 12 pictures, IDRs at 0, 5 and 9.
        let config = EncoderConfig(size: FrameSize(width: 320, height: 180), frameRate: 30, bitrate: 500_000)
        let enc = try VAAPIEncoder(config: config, session: SliceWritingFakeSession())
        let img = PlanarImage(format: .nv12, size: config.size)
        var stream: [UInt8] = []
        var keyframes: [Bool] = []
        for n in 0..<12 {
            if n == 5 || n == 9 { enc.requestKeyframe() }
            let au = try #require(try enc.encode(img, pts: Instant(nanoseconds: Int64(n))))
            keyframes.append(au.isKeyframe)
            stream += au.bytes
        }
        #expect(keyframes.indices.filter { keyframes[$0] } == [0, 5, 9])
        let (log, yuv) = try TraceHeaders.decode(annexB: stream)
        #expect(log.isEmpty, "ffmpeg: \(log)")
        #expect(yuv.count == 12 * config.size.pixelCount * 3 / 2)
        #expect(yuv.allSatisfy { $0 == 128 })
        let trace = try TraceHeaders.run(annexB: stream)
        let slices = trace.units.filter { $0.fields.contains { $0.name == "first_mb_in_slice" } }
        #expect(slices.map { $0["frame_num"] } == [0, 1, 2, 3, 4, 0, 1, 2, 3, 0, 1, 2])
        #expect(slices.compactMap { $0["idr_pic_id"] } == [0, 1, 2])
        #expect(trace.all("Sequence Parameter Set").count == 3)
        #expect(trace.all("Picture Parameter Set").count == 3)
    }
}
