import CSystemd
#if canImport(Glibc)
import Glibc
#endif

/// sd_journal_sendv: one journal entry from `FIELD=value` strings.
public enum SystemdJournal {
    /// Sends one entry; false when the journal refused it. Each field is copied into
    /// memory owned for the duration of the call (sd_journal_sendv reads iovecs).
    @discardableResult
    public static func send(_ fields: [String]) -> Bool {
        let buffers = fields.map { f -> UnsafeMutableRawBufferPointer in
            let bytes = Array(f.utf8)
            let b = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes.count, 1), alignment: 1)
            b.copyBytes(from: bytes)
            return UnsafeMutableRawBufferPointer(rebasing: b[0..<bytes.count])
        }
        defer { buffers.forEach { $0.deallocate() } }
        let iov = buffers.map { iovec(iov_base: $0.baseAddress, iov_len: $0.count) }
        return sd_journal_sendv(iov, Int32(iov.count)) >= 0
    }
}
