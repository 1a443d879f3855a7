#if canImport(Glibc)
import Glibc
#endif

/// The process environment as a dictionary (read once, by the IO shell).
public enum ProcessEnvironment {
    public static func current() -> [String: String] {
        var out: [String: String] = [:]
        var p = environ
        while let entry = p.pointee {
            let s = String(cString: entry)
            if let eq = s.firstIndex(of: "=") {
                out[String(s[..<eq])] = String(s[s.index(after: eq)...])
            }
            p += 1
        }
        return out
    }
}
