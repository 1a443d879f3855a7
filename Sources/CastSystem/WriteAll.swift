#if canImport(Glibc)
import Glibc
#endif

/// Writes all of `bytes` to `fd` with write(2): again after EINTR and after a short
/// write. Best effort: false when write(2) fails otherwise or writes nothing (a closed
/// pipe, a full disk), and the rest is dropped. For standard output and error and the
/// debug dump; `PrivateFile` keeps its own loop, as it must say why a write failed.
@discardableResult
public func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
    var off = 0
    while off < bytes.count {
        let n = Glibc.write(fd, bytes.baseAddress! + off, bytes.count - off)
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else { return false }
        off += n
    }
    return true
}
