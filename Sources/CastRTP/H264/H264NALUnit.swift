import CastCore

/// An H.264 NAL unit (ITU-T H.264 §7.3.1), header byte included.
///
/// +---------------+
/// |0|1|2|3|4|5|6|7|
/// +-+-+-+-+-+-+-+-+
/// |F|NRI|  Type   |
/// +---------------+
public struct H264NALUnit: Equatable, Sendable {
    public var bytes: ArraySlice<UInt8>

    public init(_ bytes: ArraySlice<UInt8>) { self.bytes = bytes }
    public init(_ bytes: [UInt8]) { self.bytes = bytes[...] }

    public var header: UInt8 { bytes.first ?? 0 }
    public var type: UInt8 { header & 0x1f }
    public var nri: UInt8 { header & 0x60 }
    public var forbiddenBit: UInt8 { header & 0x80 }

    // H.264 Table 7-1 (the types the sender cares about).
    public static let nonIDRSlice: UInt8 = 1
    public static let idrSlice: UInt8 = 5
    public static let sei: UInt8 = 6
    public static let sps: UInt8 = 7
    public static let pps: UInt8 = 8
    public static let accessUnitDelimiter: UInt8 = 9
    public static let fillerData: UInt8 = 12
    // RFC 6184 §5.2: payload structure types.
    public static let stapA: UInt8 = 24
    public static let fuA: UInt8 = 28

    /// Splits an Annex-B byte stream (ITU-T H.264 Annex B) into NAL units.
    /// Both 3-byte (00 00 01) and 4-byte (00 00 00 01) start codes are accepted;
    /// trailing zero bytes before a start code (trailing_zero_8bits) are dropped,
    /// and so is anything before the first start code. Empty input gives no units;
    /// non-empty input without any start code is malformed.
    public static func splitAnnexB(_ data: [UInt8]) throws -> [H264NALUnit] {
        if data.isEmpty { return [] }
        var scanner = AnnexBScanner(data)
        guard scanner.hasStartCode else {
            throw CastError(.malformed, "H.264 access unit has no Annex-B start code (\(data.count) bytes)")
        }
        var units: [H264NALUnit] = []
        while let u = scanner.next() { units.append(u) }
        return units
    }
}

/// The NAL units of an Annex-B stream one by one, as slices of it: no allocation
/// (`splitAnnexB` collects them). A value: a copy reads ahead without moving the original.
public struct AnnexBScanner: IteratorProtocol, Sendable {
    private let data: [UInt8]
    /// The next start code: where it begins and where its NAL unit does.
    private var start: (codeAt: Int, nalAt: Int)?

    public init(_ data: [UInt8]) {
        self.data = data
        start = Self.startCode(in: data, from: 0)
    }

    /// Whether the stream has a start code at all (from where the scan stands).
    public var hasStartCode: Bool { start != nil }

    public mutating func next() -> H264NALUnit? {
        while let s = start {
            let following = Self.startCode(in: data, from: s.nalAt)
            var end = following?.codeAt ?? data.count
            while end > s.nalAt, data[end - 1] == 0 { end -= 1 }   // 4-byte code's leading 0, trailing zeros
            start = following
            if end > s.nalAt { return H264NALUnit(data[s.nalAt..<end]) }
        }
        return nil
    }

    private static func startCode(in data: [UInt8], from: Int) -> (codeAt: Int, nalAt: Int)? {
        var i = from
        while i + 2 < data.count {
            if data[i + 2] > 1 { i += 3; continue }        // cannot be inside 00 00 01
            if data[i] == 0, data[i + 1] == 0, data[i + 2] == 1 { return (i, i + 3) }
            i += 1
        }
        return nil
    }
}
