/// CRC-32 as used by STUN's FINGERPRINT (RFC 8489 §14.7 refers to ITU-T V.42 /
/// ISO 3309): reflected polynomial 0xEDB88320, initial value and final XOR
/// 0xFFFFFFFF. `CRC32.checksum("123456789")` is 0xCBF43926.
public enum CRC32 {
    private static let table: [UInt32] = (0..<256).map { n -> UInt32 in
        var c = UInt32(n)
        for _ in 0..<8 { c = (c & 1) != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    public static func checksum<C: Collection>(_ data: C) -> UInt32 where C.Element == UInt8 {
        var c: UInt32 = 0xFFFF_FFFF
        for b in data { c = table[Int((c ^ UInt32(b)) & 0xff)] ^ (c >> 8) }
        return c ^ 0xFFFF_FFFF
    }
}
