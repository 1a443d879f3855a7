import CastCore
import COpenSSL

extension CastError.Code {
    public static let openssl = Self("openssl")
}

/// OpenSSL's error queue turned into a `CastError` in exactly one function.
public enum OpenSSLError {
    /// Drains the thread's OpenSSL error queue into one sentence.
    public static func drain(_ what: String) -> CastError {
        var parts: [String] = []
        while true {
            let e = ERR_get_error()
            if e == 0 { break }
            var buf = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(e, &buf, buf.count)
            let bytes = buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
            parts.append(String(decoding: bytes, as: UTF8.self))
        }
        let detail = parts.isEmpty ? "" : " (" + parts.joined(separator: "; ") + ")"
        return CastError(.openssl, "\(what) failed\(detail)")
    }
}
