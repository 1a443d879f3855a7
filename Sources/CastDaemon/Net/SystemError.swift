import CastCore

#if canImport(Glibc)
import Glibc
#endif

extension CastError {
    /// The one place `errno` becomes a Swift error (STYLE.md, swift-nio habit).
    public static func posix(_ what: String, errno e: Int32 = errno) -> CastError {
        CastError(.system, "\(what): \(String(cString: strerror(e))) (errno \(e))")
    }
}
