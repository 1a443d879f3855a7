/// Hex encoding for fingerprints, test vectors and debug output.
public enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    public static func encode<S: Sequence>(_ bytes: S, separator: String = "") -> String where S.Element == UInt8 {
        var out = ""
        var first = true
        for b in bytes {
            if !first { out += separator }
            first = false
            out.unicodeScalars.append(UnicodeScalar(digits[Int(b >> 4)]))
            out.unicodeScalars.append(UnicodeScalar(digits[Int(b & 0xf)]))
        }
        return out
    }

    /// Decodes hex, ignoring spaces, newlines and colons; nil on any other character or an odd count.
    public static func decode(_ s: String) -> [UInt8]? {
        var out: [UInt8] = []
        var hi: UInt8? = nil
        for c in s.utf8 {
            let v: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): v = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): v = c - UInt8(ascii: "A") + 10
            case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: ":"), UInt8(ascii: "\t"): continue
            default: return nil
            }
            if let h = hi { out.append(h << 4 | v); hi = nil } else { hi = v }
        }
        return hi == nil ? out : nil
    }
}
