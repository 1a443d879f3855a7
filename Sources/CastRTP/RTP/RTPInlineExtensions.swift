import CastCore

/// The header extensions a sender stamps on each packet as it leaves (abs-send-time,
/// the transport-wide sequence number, playout-delay): up to four RFC 8285 elements
/// of 1…4 bytes, held inline so that stamping a packet builds no arrays (issue 19).
/// Written exactly as `RTPExtensionBlock.best(for:)` of the same elements: the
/// one-byte form when every id is in 1…14, else the two-byte form (RFC 8285 §4.1.1).
public struct RTPInlineExtensions: Sendable, Equatable {
    public static let capacity = 4
    private var ids: SIMD4<UInt8> = .zero
    private var lengths: SIMD4<UInt8> = .zero
    /// Each element's bytes, big-endian in the low `length` bytes.
    private var values: SIMD4<UInt32> = .zero
    public private(set) var count = 0

    public init() {}

    public var isEmpty: Bool { count == 0 }

    /// Adds an element: the low `length` (1…4) bytes of `value`, big-endian. False (and
    /// nothing added) when full or when the length is outside 1…4.
    @discardableResult
    public mutating func append(id: UInt8, value: UInt32, length: Int) -> Bool {
        guard count < Self.capacity, (1...4).contains(length) else { return false }
        ids[count] = id
        lengths[count] = UInt8(length)
        values[count] = length == 4 ? value : value & (UInt32(1) << UInt32(8 * length) - 1)
        count += 1
        return true
    }

    private var fitsOneByte: Bool { (0..<count).allSatisfy { (1...14).contains(ids[$0]) } }

    private var bodyLength: Int {
        var n = 0
        for i in 0..<count { n += Int(lengths[i]) }
        return n + count * (fitsOneByte ? 1 : 2)
    }

    /// Bytes the block occupies in a header, with its 4-byte preamble and padding (0 when empty).
    public var encodedLength: Int { isEmpty ? 0 : 4 + (bodyLength + 3) / 4 * 4 }

    /// The same elements as an `RTPExtensionBlock` (tests, and readers that want one).
    public var block: RTPExtensionBlock? {
        guard !isEmpty else { return nil }
        return .best(for: (0..<count).map { i in
            RTPHeaderExtension(id: ids[i], data: (0..<Int(lengths[i])).map { k in
                UInt8(truncatingIfNeeded: values[i] >> UInt32(8 * (Int(lengths[i]) - 1 - k)))
            })
        })
    }

    // The block's layout: RFC 3550 §5.3.1 (preamble), RFC 8285 §4.2 (one-byte
    // elements: id << 4 | length - 1) and §4.3 (two-byte elements: id, length).
    func write(into w: inout ByteWriter) throws {
        guard !isEmpty else { return }
        let oneByte = fitsOneByte
        let body = bodyLength
        let padded = (body + 3) / 4 * 4
        w.u16(oneByte ? RTPExtensionBlock.oneByteProfile : RTPExtensionBlock.twoByteProfile)
        w.u16(UInt16(padded / 4))
        for i in 0..<count {
            let id = ids[i], length = lengths[i]
            if oneByte {
                w.u8(id << 4 | (length - 1))
            } else {
                // RFC 8285 §4.3: id 0 is padding, not an element.
                guard id != 0 else { throw CastError(.usage, "a two-byte RTP header extension needs an id in 1…255 (id 0)") }
                w.u8(id)
                w.u8(length)
            }
            for k in stride(from: Int(length) - 1, through: 0, by: -1) {
                w.u8(UInt8(truncatingIfNeeded: values[i] >> UInt32(8 * k)))
            }
        }
        for _ in body..<padded { w.u8(0) }   // byte by byte: ByteWriter.zeros allocates per byte unoptimised
    }
}
