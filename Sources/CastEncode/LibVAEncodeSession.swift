import CastCore
import CastMedia
import CastSystem
import CVA
#if canImport(Glibc)
import Glibc
#endif

/// The real `VAEncodeSession`: libva on a DRM render node. It owns the file
/// descriptor, the display, the config, three surfaces (the input and two
/// reconstructed pictures that take turns as the reference), the context and
/// the coded buffer, and frees them in `deinit` (also when `init` fails half way).
///
/// Written to the libva 1.x API (va.h, va_enc_h264.h) and compiled here, but
/// not run against a driver: no build machine has one.
final class LibVAEncodeSession: VAEncodeSession {
    private(set) var capabilities: VAEncodeCapabilities
    private let size: FrameSize
    private let widthInMbs: Int
    private let heightInMbs: Int

    private var fd: Int32 = -1
    private var display: VADisplay?
    private var configID = LibVAEncodeSession.invalidID
    private var contextID = LibVAEncodeSession.invalidID
    /// [input, reconstructed 0, reconstructed 1]
    private var surfaces: [VASurfaceID] = []
    private var codedBuffer = LibVAEncodeSession.invalidID
    /// The upload image when the driver cannot map surfaces directly (vaDeriveImage fails).
    private var uploadImage: VAImage?

    static let invalidID: UInt32 = 0xffff_ffff
    static let fourccNV12: UInt32 = 0x3231_564e  // VA_FOURCC_NV12

    /// The profiles and entrypoints tried, in order: Constrained Baseline first
    /// (spec §7), Main where a driver only offers that; low power before full.
    static let candidates: [(VAProfile, H264Profile, VAEntrypoint, Bool)] = [
        (VAProfileH264ConstrainedBaseline, .constrainedBaseline, VAEntrypointEncSliceLP, true),
        (VAProfileH264ConstrainedBaseline, .constrainedBaseline, VAEntrypointEncSlice, false),
        (VAProfileH264Main, .main, VAEntrypointEncSliceLP, true),
        (VAProfileH264Main, .main, VAEntrypointEncSlice, false),
    ]

    /// `allowMain`: the receiver accepts Main (the SDP offered it); otherwise only Constrained Baseline is used.
    init(node: String, size: FrameSize, allowMain: Bool = false) throws {
        self.size = size
        widthInMbs = (size.width + 15) / 16
        heightInMbs = (size.height + 15) / 16
        capabilities = VAEncodeCapabilities(profile: .constrainedBaseline, lowPower: false, packedHeaders: [], driver: "unknown", node: node)

        fd = open(node, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else {
            throw CastError.posix(.encoderUnavailable) { "VA-API: cannot open \(node) (\($0))" }
        }
        guard let d = vaGetDisplayDRM(fd) else {
            throw CastError(.encoderUnavailable, "VA-API: vaGetDisplayDRM failed on \(node)")
        }
        display = d
        var major: Int32 = 0, minor: Int32 = 0
        try check(vaInitialize(d, &major, &minor), "vaInitialize")
        let driver = vaQueryVendorString(d).map { String(cString: $0) } ?? "unknown"
        capabilities.driver = driver

        let chosen = try createConfig(allowMain: allowMain)
        capabilities.profile = chosen.profile
        capabilities.lowPower = chosen.lowPower
        capabilities.packedHeaders = chosen.packed

        let codedWidth = UInt32(widthInMbs * 16), codedHeight = UInt32(heightInMbs * 16)
        var ids = [VASurfaceID](repeating: Self.invalidID, count: 3)
        // NV12 said explicitly: the upload writes NV12, and vaDeriveImage hands back the surface's own layout.
        var nv12 = VASurfaceAttrib()
        nv12.type = VASurfaceAttribPixelFormat
        nv12.flags = UInt32(VA_SURFACE_ATTRIB_SETTABLE)
        nv12.value.type = VAGenericValueTypeInteger
        nv12.value.value.i = Int32(bitPattern: Self.fourccNV12)
        try check(vaCreateSurfaces(d, UInt32(VA_RT_FORMAT_YUV420), codedWidth, codedHeight, &ids, 3, &nv12, 1), "vaCreateSurfaces (NV12)")
        surfaces = ids
        try check(vaCreateContext(d, configID, Int32(codedWidth), Int32(codedHeight), Int32(VA_PROGRESSIVE),
                                  &ids, 3, &contextID), "vaCreateContext")
        // Room for an uncompressed picture: no coded picture of ours can be larger.
        let codedSize = UInt32(max(1 << 20, Int(codedWidth * codedHeight) * 3 / 2))
        try check(vaCreateBuffer(d, contextID, VAEncCodedBufferType, codedSize, 1, nil, &codedBuffer), "vaCreateBuffer (coded buffer)")
    }

    deinit {
        guard let d = display else {
            if fd >= 0 { close(fd) }
            return
        }
        if codedBuffer != Self.invalidID { vaDestroyBuffer(d, codedBuffer) }
        if let img = uploadImage { vaDestroyImage(d, img.image_id) }
        if contextID != Self.invalidID { vaDestroyContext(d, contextID) }
        if !surfaces.isEmpty { vaDestroySurfaces(d, &surfaces, Int32(surfaces.count)) }
        if configID != Self.invalidID { vaDestroyConfig(d, configID) }
        vaTerminate(d)  // also frees a display that never initialised (as VAAPIProbe does)
        close(fd)
    }

    /// The sentence (rule 5, docs/architecture.md) for a failed call: which call, libva's status string.
    private func check(_ status: VAStatus, _ call: String) throws {
        guard status != VA_STATUS_SUCCESS else { return }
        let why = String(cString: vaErrorStr(status))
        throw CastError(.encoder, "VA-API: \(call) failed on \(capabilities.node) (driver \(capabilities.driver)): \(why) (status \(status))")
    }

    // MARK: Negotiation

    private struct Choice {
        var vaProfile: VAProfile
        var profile: H264Profile
        var entrypoint: VAEntrypoint
        var lowPower: Bool
        var packed: VAPackedHeaderKinds
    }

    /// The candidates the driver offers with 4:2:0 surfaces, CBR and at least
    /// one reference frame, in order, with the packed headers each takes; the
    /// first whose vaCreateConfig succeeds is used (a low-power entrypoint can
    /// be listed yet refuse, e.g. without its firmware).
    private func createConfig(allowMain: Bool) throws -> Choice {
        guard let d = display else { throw CastError(.encoder, "VA-API: no display") }
        var reasons: [String] = []
        var eps = [VAEntrypoint](repeating: VAEntrypoint(rawValue: 0), count: Int(max(1, vaMaxNumEntrypoints(d))))
        for (vaProfile, profile, entrypoint, lowPower) in Self.candidates {
            var n: Int32 = 0
            guard vaQueryConfigEntrypoints(d, vaProfile, &eps, &n) == VA_STATUS_SUCCESS,
                  eps.prefix(Int(n)).contains(where: { $0.rawValue == entrypoint.rawValue }) else { continue }
            let name = "\(profile)/\(lowPower ? "EncSliceLP" : "EncSlice")"
            guard profile != .main || allowMain else {
                reasons.append("\(name) is not offered to the receiver (Constrained Baseline only)"); continue
            }
            var attribs = [VAConfigAttrib(type: VAConfigAttribRTFormat, value: 0),
                           VAConfigAttrib(type: VAConfigAttribRateControl, value: 0),
                           VAConfigAttrib(type: VAConfigAttribEncPackedHeaders, value: 0),
                           VAConfigAttrib(type: VAConfigAttribEncMaxRefFrames, value: 0)]
            guard vaGetConfigAttributes(d, vaProfile, entrypoint, &attribs, Int32(attribs.count)) == VA_STATUS_SUCCESS else {
                reasons.append("\(name): vaGetConfigAttributes failed"); continue
            }
            let notSupported = UInt32(VA_ATTRIB_NOT_SUPPORTED)
            guard attribs[0].value != notSupported, attribs[0].value & UInt32(VA_RT_FORMAT_YUV420) != 0 else {
                reasons.append("\(name) has no 4:2:0 surfaces"); continue
            }
            guard attribs[1].value != notSupported, attribs[1].value & UInt32(VA_RC_CBR) != 0 else {
                reasons.append("\(name) has no CBR rate control"); continue
            }
            // The low 16 bits are the list-0 references (va.h, VAConfigAttribEncMaxRefFrames).
            if attribs[3].value != notSupported && attribs[3].value & 0xffff == 0 {
                reasons.append("\(name) allows no reference frame"); continue
            }
            let offered = attribs[2].value == notSupported ? 0 : attribs[2].value
            let packed = VAPackedHeaderKinds(rawValue: offered).intersection([.sequence, .picture, .slice])
            var config = [VAConfigAttrib(type: VAConfigAttribRTFormat, value: UInt32(VA_RT_FORMAT_YUV420)),
                          VAConfigAttrib(type: VAConfigAttribRateControl, value: UInt32(VA_RC_CBR))]
            if !packed.isEmpty {
                config.append(VAConfigAttrib(type: VAConfigAttribEncPackedHeaders, value: packed.rawValue))
            }
            let st = vaCreateConfig(d, vaProfile, entrypoint, &config, Int32(config.count), &configID)
            guard st == VA_STATUS_SUCCESS else {
                configID = Self.invalidID
                reasons.append("\(name): vaCreateConfig failed (\(String(cString: vaErrorStr(st))))"); continue
            }
            return Choice(vaProfile: vaProfile, profile: profile, entrypoint: entrypoint, lowPower: lowPower, packed: packed)
        }
        let detail = reasons.isEmpty ? "no H.264 encode entrypoint" : reasons.joined(separator: "; ")
        throw CastError(.encoderUnavailable, "VA-API: \(capabilities.node) (driver \(capabilities.driver)) cannot encode H.264 as castd needs: \(detail)")
    }

    // MARK: Upload

    func upload(_ image: PlanarImage) throws {
        guard let d = display else { throw CastError(.encoder, "VA-API: no display") }
        precondition(image.format == .nv12 && image.size == size)
        let input = surfaces[0]
        var derived = VAImage()
        if uploadImage == nil && vaDeriveImage(d, input, &derived) == VA_STATUS_SUCCESS {
            // The surface's own memory: write straight into it, if it is laid out as NV12.
            defer { vaDestroyImage(d, derived.image_id) }
            if derived.format.fourcc == Self.fourccNV12 {
                try copy(image, into: derived)
                return
            }
        }
        if uploadImage == nil {
            var format = VAImageFormat()
            format.fourcc = Self.fourccNV12
            format.byte_order = UInt32(VA_LSB_FIRST)
            format.bits_per_pixel = 12
            var img = VAImage()
            try check(vaCreateImage(d, &format, Int32(widthInMbs * 16), Int32(heightInMbs * 16), &img), "vaCreateImage (NV12)")
            uploadImage = img
        }
        let img = uploadImage!
        try copy(image, into: img)
        let w = UInt32(widthInMbs * 16), h = UInt32(heightInMbs * 16)
        try check(vaPutImage(d, input, img.image_id, 0, 0, w, h, 0, 0, w, h), "vaPutImage")
    }

    /// Copies the picture into a mapped VA image (vaMapBuffer).
    private func copy(_ image: PlanarImage, into target: VAImage) throws {
        guard let d = display else { return }
        var mapped: UnsafeMutableRawPointer?
        try check(vaMapBuffer(d, target.buf, &mapped), "vaMapBuffer (NV12 image)")
        defer { vaUnmapBuffer(d, target.buf) }
        guard let base = mapped else { throw CastError(.encoder, "VA-API: vaMapBuffer gave no memory for the NV12 image") }
        Self.writePadded(image, to: base, pitches: (Int(target.pitches.0), Int(target.pitches.1)),
                         offsets: (Int(target.offsets.0), Int(target.offsets.1)),
                         coded: FrameSize(width: widthInMbs * 16, height: heightInMbs * 16))
    }

    /// Writes an NV12 picture into NV12 memory of the coded (macroblock-aligned)
    /// size at the given plane pitches and offsets, repeating the last column
    /// and row into the padding: the encoder codes those pixels too (the SPS
    /// crops them), and a copy of the edge costs almost no bits.
    static func writePadded(_ image: PlanarImage, to base: UnsafeMutableRawPointer,
                            pitches: (Int, Int), offsets: (Int, Int), coded: FrameSize) {
        let w = image.size.width
        for (plane, rows, codedRows, pitch, offset) in [(0, image.size.height, coded.height, pitches.0, offsets.0),
                                                         (1, image.size.height / 2, coded.height / 2, pitches.1, offsets.1)] {
            for y in 0..<codedRows {
                let from = image.plane(plane) + min(y, rows - 1) * image.strides[plane]
                let to = (base + offset + y * pitch).assumingMemoryBound(to: UInt8.self)
                memcpy(to, from, w)
                // Luma repeats its last sample; the interleaved UV plane its last Cb,Cr pair.
                let step = plane == 0 ? 1 : 2
                var x = w
                while x < coded.width {
                    for k in 0..<step { to[x + k] = from[w - step + k] }
                    x += step
                }
            }
        }
    }

    // MARK: One picture

    func encode(_ picture: VAPictureRequest) throws -> [UInt8] {
        guard let d = display else { throw CastError(.encoder, "VA-API: no display") }
        var buffers: [VABufferID] = []
        defer { for id in buffers { vaDestroyBuffer(d, id) } }
        if let sps = picture.sequence {
            buffers.append(try buffer(VAEncSequenceParameterBufferType,
                                      value: Self.sequenceBuffer(sps, bitsPerSecond: picture.bitsPerSecond)))
        }
        for misc in picture.misc { buffers.append(try miscBuffer(misc)) }
        buffers.append(try buffer(VAEncPictureParameterBufferType,
                                  value: Self.pictureBuffer(picture, surfaces: surfaces, codedBuffer: codedBuffer)))
        // Packed sequence and picture headers, then the slice's packed header right before its parameters (va.h).
        for header in picture.packedHeaders where header.kind != .slice { buffers += try packed(header) }
        for header in picture.packedHeaders where header.kind == .slice { buffers += try packed(header) }
        buffers.append(try buffer(VAEncSliceParameterBufferType,
                                  value: Self.sliceBuffer(picture, widthInMbs: widthInMbs, heightInMbs: heightInMbs, surfaces: surfaces)))

        try check(vaBeginPicture(d, contextID, surfaces[0]), "vaBeginPicture")
        let rendered = vaRenderPicture(d, contextID, &buffers, Int32(buffers.count))
        let ended = vaEndPicture(d, contextID)  // also after a failed render: the picture must be closed
        try check(rendered, "vaRenderPicture")
        try check(ended, "vaEndPicture")
        try check(vaSyncSurface(d, surfaces[0]), "vaSyncSurface")
        return try readCoded()
    }

    /// The coded buffer's segments, concatenated.
    private func readCoded() throws -> [UInt8] {
        guard let d = display else { return [] }
        var mapped: UnsafeMutableRawPointer?
        try check(vaMapBuffer(d, codedBuffer, &mapped), "vaMapBuffer (coded buffer)")
        defer { vaUnmapBuffer(d, codedBuffer) }
        var out: [UInt8] = []
        var segment = mapped?.assumingMemoryBound(to: VACodedBufferSegment.self)
        while let s = segment {
            if s.pointee.status & UInt32(VA_CODED_BUF_STATUS_SLICE_OVERFLOW_MASK) != 0 {
                throw CastError(.encoder, "VA-API: the coded picture overflowed its buffer on \(capabilities.node)")
            }
            if let b = s.pointee.buf, s.pointee.size > 0 {
                out.append(contentsOf: UnsafeRawBufferPointer(start: b, count: Int(s.pointee.size)))
            }
            segment = s.pointee.next?.assumingMemoryBound(to: VACodedBufferSegment.self)
        }
        return out
    }

    private func buffer(_ type: VABufferType, bytes: UnsafeRawBufferPointer) throws -> VABufferID {
        guard let d = display else { throw CastError(.encoder, "VA-API: no display") }
        var id = Self.invalidID
        try check(vaCreateBuffer(d, contextID, type, UInt32(bytes.count), 1, UnsafeMutableRawPointer(mutating: bytes.baseAddress), &id),
                  "vaCreateBuffer (type \(type.rawValue))")
        return id
    }

    private func buffer<T>(_ type: VABufferType, value: T) throws -> VABufferID {
        var v = value
        return try withUnsafeBytes(of: &v) { try buffer(type, bytes: $0) }
    }

    /// A VAEncPackedHeaderParameterBuffer and its VAEncPackedHeaderDataBuffer.
    private func packed(_ header: VAPackedHeader) throws -> [VABufferID] {
        var param = VAEncPackedHeaderParameterBuffer()
        param.type = header.kind.rawValue
        param.bit_length = UInt32(header.bitLength)
        param.has_emulation_bytes = 1  // H264NAL.annexB already escaped the payload
        let p = try buffer(VAEncPackedHeaderParameterBufferType, value: param)
        let data = try header.bytes.withUnsafeBytes { try buffer(VAEncPackedHeaderDataBufferType, bytes: $0) }
        return [p, data]
    }

    /// A VAEncMiscParameterBuffer: its type, then the payload (the C struct's flexible `data` member).
    private func miscBuffer(_ misc: VAMiscParameter) throws -> VABufferID {
        func make<T>(_ type: VAEncMiscParameterType, _ payload: T) throws -> VABufferID {
            let header = MemoryLayout<UInt32>.size
            var bytes = [UInt8](repeating: 0, count: header + MemoryLayout<T>.size)
            bytes.withUnsafeMutableBytes { raw in
                raw.storeBytes(of: type.rawValue, as: UInt32.self)
                withUnsafeBytes(of: payload) { p in
                    UnsafeMutableRawBufferPointer(rebasing: raw[header...]).copyMemory(from: p)
                }
            }
            return try bytes.withUnsafeBytes { try buffer(VAEncMiscParameterBufferType, bytes: $0) }
        }
        switch misc {
        case let .rateControl(bps, window):
            return try make(VAEncMiscParameterTypeRateControl, Self.rateControl(bitsPerSecond: bps, windowMilliseconds: window))
        case let .hrd(size, fullness):
            var h = VAEncMiscParameterHRD()
            h.buffer_size = UInt32(size)
            h.initial_buffer_fullness = UInt32(fullness)
            return try make(VAEncMiscParameterTypeHRD, h)
        case let .frameRate(fps):
            var f = VAEncMiscParameterFrameRate()
            f.framerate = UInt32(fps) | (1 << 16)  // numerator | denominator << 16
            return try make(VAEncMiscParameterTypeFrameRate, f)
        }
    }

    // MARK: Parameter buffers (pure; tested without a device)

    static func rateControl(bitsPerSecond: Int, windowMilliseconds: Int) -> VAEncMiscParameterRateControl {
        var rc = VAEncMiscParameterRateControl()
        rc.bits_per_second = UInt32(bitsPerSecond)
        rc.target_percentage = 100  // CBR: the target is the maximum
        rc.window_size = UInt32(windowMilliseconds)
        // Every picture must be coded: a skipped one would break the frame_num and
        // reference bookkeeping of VAAPIEncoder. No stuffing: the rate is a cap.
        rc.rc_flags.bits.disable_frame_skip = 1
        rc.rc_flags.bits.disable_bit_stuffing = 1
        return rc
    }

    static func sequenceBuffer(_ sps: H264SequenceParameterSet, bitsPerSecond: Int) -> VAEncSequenceParameterBufferH264 {
        var s = VAEncSequenceParameterBufferH264()
        s.seq_parameter_set_id = UInt8(sps.id)
        s.level_idc = sps.levelIdc
        // IDRs come only on demand, and the picture buffers say which picture is one; these are hints
        // to the rate control, set to the largest frame_num period.
        s.intra_period = UInt32(1 << sps.log2MaxFrameNum)
        s.intra_idr_period = UInt32(1 << sps.log2MaxFrameNum)
        s.ip_period = 1  // no B-frames
        s.bits_per_second = UInt32(bitsPerSecond)
        s.max_num_ref_frames = UInt32(sps.maxNumRefFrames)
        s.picture_width_in_mbs = UInt16(sps.widthInMbs)
        s.picture_height_in_mbs = UInt16(sps.heightInMbs)
        s.seq_fields.bits.chroma_format_idc = 1
        s.seq_fields.bits.frame_mbs_only_flag = 1
        s.seq_fields.bits.direct_8x8_inference_flag = 1
        s.seq_fields.bits.log2_max_frame_num_minus4 = UInt32(sps.log2MaxFrameNum - 4)
        s.seq_fields.bits.pic_order_cnt_type = 2
        s.frame_cropping_flag = sps.hasCropping ? 1 : 0
        s.frame_crop_right_offset = UInt32(sps.cropRight / 2)
        s.frame_crop_bottom_offset = UInt32(sps.cropBottom / 2)
        s.vui_parameters_present_flag = 1
        s.vui_fields.bits.timing_info_present_flag = 1
        s.vui_fields.bits.bitstream_restriction_flag = 1
        s.vui_fields.bits.log2_max_mv_length_horizontal = H264SequenceParameterSet.log2MaxMvLength
        s.vui_fields.bits.log2_max_mv_length_vertical = H264SequenceParameterSet.log2MaxMvLength
        s.vui_fields.bits.motion_vectors_over_pic_boundaries_flag = 1
        s.num_units_in_tick = sps.numUnitsInTick
        s.time_scale = sps.timeScale
        return s
    }

    static func pictureH264(surface: VASurfaceID, frameNum: Int, pictureOrderCount: Int32, flags: UInt32) -> VAPictureH264 {
        var p = VAPictureH264()
        p.picture_id = surface
        p.frame_idx = UInt32(frameNum)
        p.flags = flags
        p.TopFieldOrderCnt = pictureOrderCount
        p.BottomFieldOrderCnt = pictureOrderCount
        return p
    }

    static var invalidPicture: VAPictureH264 {
        pictureH264(surface: invalidID, frameNum: 0, pictureOrderCount: 0, flags: UInt32(VA_PICTURE_H264_INVALID))
    }

    /// Sets every element of a C array imported as a tuple of VAPictureH264: the first to `first`, the rest invalid.
    static func fill<T>(_ tuple: inout T, first: VAPictureH264?) {
        withUnsafeMutableBytes(of: &tuple) { raw in
            let list = raw.bindMemory(to: VAPictureH264.self)
            for i in list.indices { list[i] = invalidPicture }
            if let first { list[0] = first }
        }
    }

    static func referencePicture(_ r: VAPictureRequest, surfaces: [VASurfaceID]) -> VAPictureH264? {
        r.reference.map {
            pictureH264(surface: surfaces[1 + $0], frameNum: r.referenceFrameNum, pictureOrderCount: r.referencePictureOrderCount,
                        flags: UInt32(VA_PICTURE_H264_SHORT_TERM_REFERENCE))
        }
    }

    static func pictureBuffer(_ r: VAPictureRequest, surfaces: [VASurfaceID], codedBuffer: VABufferID) -> VAEncPictureParameterBufferH264 {
        var p = VAEncPictureParameterBufferH264()
        p.CurrPic = pictureH264(surface: surfaces[1 + r.reconstructed], frameNum: r.slice.frameNum,
                                pictureOrderCount: r.pictureOrderCount, flags: 0)
        fill(&p.ReferenceFrames, first: referencePicture(r, surfaces: surfaces))
        p.coded_buf = codedBuffer
        p.pic_parameter_set_id = UInt8(r.pps.id)
        p.seq_parameter_set_id = UInt8(r.pps.spsId)
        p.frame_num = UInt16(r.slice.frameNum)
        p.pic_init_qp = UInt8(r.pps.picInitQP)
        p.num_ref_idx_l0_active_minus1 = 0
        p.pic_fields.bits.idr_pic_flag = r.slice.isIDR ? 1 : 0
        p.pic_fields.bits.reference_pic_flag = 1
        p.pic_fields.bits.entropy_coding_mode_flag = r.pps.cabac ? 1 : 0
        p.pic_fields.bits.deblocking_filter_control_present_flag = r.pps.deblockingFilterControlPresent ? 1 : 0
        return p
    }

    static func sliceBuffer(_ r: VAPictureRequest, widthInMbs: Int, heightInMbs: Int,
                            surfaces: [VASurfaceID]) -> VAEncSliceParameterBufferH264 {
        var s = VAEncSliceParameterBufferH264()
        s.macroblock_address = UInt32(r.slice.firstMb)
        s.num_macroblocks = UInt32(widthInMbs * heightInMbs)
        s.macroblock_info = invalidID
        s.slice_type = UInt8(r.slice.type.rawValue)
        s.pic_parameter_set_id = UInt8(r.pps.id)
        s.idr_pic_id = UInt16(r.slice.idrPicId)
        fill(&s.RefPicList0, first: r.slice.type == .p ? referencePicture(r, surfaces: surfaces) : nil)
        fill(&s.RefPicList1, first: nil)
        s.cabac_init_idc = 0
        s.slice_qp_delta = Int8(r.slice.sliceQPDelta)
        s.disable_deblocking_filter_idc = UInt8(r.slice.disableDeblockingFilterIdc)
        return s
    }
}
