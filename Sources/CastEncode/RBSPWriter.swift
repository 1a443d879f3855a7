/// Bits of an H.264 raw byte sequence payload, most significant bit first
/// (H.264 7.2): fixed-width fields u(n), Exp-Golomb codes ue(v)/se(v)
/// (9.1), and the trailing bits that end a parameter set (7.3.2.11).
/// A slice header handed to VA-API as a packed header stops mid-byte, so the
/// writer keeps its exact bit count.
struct RBSPWriter {
    private(set) var bytes: [UInt8] = []
    /// Bits written so far (the last byte of `bytes` holds the partial ones, zero-padded).
    private(set) var bitCount = 0

    var isByteAligned: Bool { bitCount % 8 == 0 }

    /// u(n): `value` in `n` bits (n ≤ 32); higher bits of `value` must be zero.
    mutating func u(_ n: Int, _ value: UInt32) {
        precondition(n >= 0 && n <= 32 && (n == 32 || value >> UInt32(n) == 0), "\(value) does not fit in \(n) bits")
        var left = n
        while left > 0 {
            let free = 8 - bitCount % 8
            if free == 8 { bytes.append(0) }
            let take = min(free, left)
            let chunk = UInt8(truncatingIfNeeded: (value >> UInt32(left - take)) & ((1 << UInt32(take)) - 1))
            bytes[bytes.count - 1] |= chunk << UInt8(free - take)
            left -= take
            bitCount += take
        }
    }

    mutating func flag(_ b: Bool) { u(1, b ? 1 : 0) }

    /// ue(v) (9.1): leadingZeroBits zeros, a one, then the low bits of value + 1.
    mutating func ue(_ value: UInt32) {
        let v = UInt64(value) + 1
        let length = 64 - v.leadingZeroBitCount  // bits in v, 1…33
        u(length - 1, 0)
        if length > 32 {
            u(1, 1)
            u(32, UInt32(truncatingIfNeeded: v))
        } else {
            u(length, UInt32(v))
        }
    }

    /// se(v) (9.1.1, Table 9-3): k > 0 ↦ 2k − 1, k ≤ 0 ↦ −2k.
    mutating func se(_ value: Int32) {
        let k = Int64(value)
        ue(UInt32(k > 0 ? 2 * k - 1 : -2 * k))
    }

    /// rbsp_trailing_bits() (7.3.2.11): a stop bit, then zeros to the byte boundary.
    mutating func trailingBits() {
        u(1, 1)
        if !isByteAligned { u(8 - bitCount % 8, 0) }
    }
}

/// NAL units in Annex-B form (H.264 7.3.1, B.1): a four-byte start code, the
/// one-byte header, and the payload with emulation prevention bytes.
enum H264NAL {
    /// nal_unit_type values castd writes (Table 7-1).
    enum UnitType: UInt8 {
        case nonIDRSlice = 1
        case idrSlice = 5
        case sps = 7
        case pps = 8
    }

    static let startCode: [UInt8] = [0, 0, 0, 1]

    /// The NAL header byte: forbidden_zero_bit, nal_ref_idc (2 bits), nal_unit_type (5 bits).
    static func header(_ type: UnitType, refIdc: UInt8) -> UInt8 {
        precondition(refIdc < 4)
        return refIdc << 5 | type.rawValue
    }

    /// emulation_prevention_three_byte (7.4.1): inside a NAL unit, two zero
    /// bytes followed by a byte ≤ 3 get a 0x03 between them, so that no start
    /// code (00 00 01) or its look-alikes appear in the payload.
    static func escape(_ rbsp: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(rbsp.count + rbsp.count / 64 + 1)
        var zeros = 0
        for b in rbsp {
            if zeros >= 2 && b <= 3 {
                out.append(3)
                zeros = 0
            }
            out.append(b)
            zeros = b == 0 ? zeros + 1 : 0
        }
        return out
    }

    /// Start code + header + escaped payload.
    static func annexB(_ type: UnitType, refIdc: UInt8, rbsp: [UInt8]) -> [UInt8] {
        startCode + [header(type, refIdc: refIdc)] + escape(rbsp)
    }
}
