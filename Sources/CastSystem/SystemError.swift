import CastCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension CastError {
    /// The one place `errno` becomes a Swift error (rule 5, docs/architecture.md; the swift-nio habit).
    /// Every IO shell in every target calls this (or `posix(_:errno:code:)`, which
    /// calls it), so the error always carries the number in `posixCode` for callers
    /// that decide on it: compare `code` and `posixCode`, never `message`.
    ///
    /// `e` is read at the call site, before `sentence` runs, so nothing the sentence
    /// does can change it. APIs that return a negative errno (sd-bus, PipeWire) pass
    /// `errno: -r`.
    public static func posix(_ code: Code = .system, errno e: Int32 = errno,
                             _ sentence: (_ reason: String) -> String) -> CastError {
        var error = CastError(code, sentence(posixReason(e)))
        error.posixCode = e
        return error
    }

    /// "what: reason (errno N)", the short form for a failed system call.
    public static func posix(_ what: String, errno e: Int32 = errno, code: Code = .system) -> CastError {
        posix(code, errno: e) { "\(what): \($0) (errno \(e))" }
    }

    /// strerror's sentence for `e`, for the few places that report a reason without
    /// throwing (a probe's verdict); everything that throws uses `posix`.
    public static func posixReason(_ e: Int32) -> String {
        guard let text = strerror(e) else { return "errno \(e)" }
        return String(cString: text)
    }
}
