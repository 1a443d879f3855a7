import CastCore
import CastMedia

/// The VA-API calls of one H.264 encode session, behind a protocol so that
/// `VAAPIEncoder`'s control logic (picture types, frame_num, idr_pic_id,
/// packed headers, rate-control buffers) runs against a fake in unit tests.
/// `LibVAEncodeSession` is the real one: a DRM render node, a config, an
/// input surface, two reconstructed surfaces and a coded buffer.
protocol VAEncodeSession: AnyObject {
    var capabilities: VAEncodeCapabilities { get }
    /// Copies an NV12 picture into the input surface.
    func upload(_ image: PlanarImage) throws
    /// Encodes the uploaded picture with these parameters and returns the coded
    /// bytes (Annex-B, the packed headers first when there are any).
    func encode(_ picture: VAPictureRequest) throws -> [UInt8]
}

/// What the session negotiated with the driver.
struct VAEncodeCapabilities: Equatable, Sendable {
    var profile: H264Profile
    /// VAEntrypointEncSliceLP (low-power fixed function) rather than EncSlice.
    var lowPower: Bool
    /// The packed headers the driver takes from us (VAConfigAttribEncPackedHeaders).
    var packedHeaders: VAPackedHeaderKinds
    var driver: String
    var node: String
}

/// VA_ENC_PACKED_HEADER_SEQUENCE, _PICTURE and _SLICE.
struct VAPackedHeaderKinds: OptionSet, Equatable, Sendable {
    let rawValue: UInt32
    static let sequence = VAPackedHeaderKinds(rawValue: 0x1)
    static let picture = VAPackedHeaderKinds(rawValue: 0x2)
    static let slice = VAPackedHeaderKinds(rawValue: 0x4)
}

/// A header we write and the driver puts in the bitstream as is
/// (VAEncPackedHeaderParameterBuffer + VAEncPackedHeaderDataBuffer).
struct VAPackedHeader: Equatable, Sendable {
    enum Kind: UInt32, Sendable {
        case sequence = 1  // VAEncPackedHeaderSequence
        case picture = 2   // VAEncPackedHeaderPicture
        case slice = 3     // VAEncPackedHeaderSlice
    }
    var kind: Kind
    /// Start code, NAL header, escaped payload.
    var bytes: [UInt8]
    var bitLength: Int
}

/// VAEncMiscParameterBuffer contents castd sends.
enum VAMiscParameter: Equatable, Sendable {
    /// VAEncMiscParameterTypeRateControl: the CBR target, and the rate-control window in ms.
    case rateControl(bitsPerSecond: Int, windowMilliseconds: Int)
    /// VAEncMiscParameterTypeHRD: the coded picture buffer in bits.
    case hrd(bufferSize: Int, initialFullness: Int)
    /// VAEncMiscParameterTypeFrameRate.
    case frameRate(Int)
}

/// Everything one vaBeginPicture…vaEndPicture carries.
struct VAPictureRequest: Equatable, Sendable {
    /// The sequence parameter buffer: sent with every IDR.
    var sequence: H264SequenceParameterSet?
    var bitsPerSecond: Int
    var pps: H264PictureParameterSet
    var slice: H264SliceHeader
    /// TopFieldOrderCnt = BottomFieldOrderCnt for a frame (8.2.1.3, type 2: 2 × pictures since the IDR).
    var pictureOrderCount: Int32
    /// Which of the two reconstructed surfaces this picture is written to, and
    /// which holds its reference (nil for an IDR).
    var reconstructed: Int
    var reference: Int?
    var referencePictureOrderCount: Int32
    var referenceFrameNum: Int
    var packedHeaders: [VAPackedHeader]
    var misc: [VAMiscParameter]
}
