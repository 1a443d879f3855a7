import CastCore
#if canImport(Glibc)
import Glibc
#endif

/// Small private files (credentials, the portal's restore token): the
/// directory 0700, the file 0600, replaced atomically.
public enum PrivateFile {
    /// Creates `directory` (and missing parents, 0700) if needed, and tightens it to 0700.
    public static func ensureDirectory(_ directory: String) throws {
        var st = stat()
        if stat(directory, &st) != 0 {
            var path = ""
            for part in directory.split(separator: "/", omittingEmptySubsequences: true) {
                path += "/" + part
                if mkdir(path, 0o700) != 0 && errno != EEXIST { throw error("create \(path)") }
            }
        }
        guard chmod(directory, 0o700) == 0 else { throw error("make \(directory) private") }
    }

    /// Writes `bytes` to `directory/name` atomically: a temporary file (0600)
    /// in the same directory, fsync, rename over the old one, fsync the directory.
    public static func write(_ bytes: [UInt8], to name: String, in directory: String) throws {
        try ensureDirectory(directory)
        let file = directory + "/" + name
        let tmp = directory + "/.\(name).\(getpid()).\(String(UInt32.random(in: 0...UInt32.max), radix: 16)).tmp"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw error("create \(tmp)") }
        var ok = false
        defer { if !ok { unlink(tmp) } }
        do {
            defer { close(fd) }
            var off = 0
            while off < bytes.count {
                let n = bytes[off...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
                if n < 0 { if errno == EINTR { continue }; throw error("write \(tmp)") }
                off += n
            }
            guard fchmod(fd, 0o600) == 0, fsync(fd) == 0 else { throw error("sync \(tmp)") }
        }
        guard rename(tmp, file) == 0 else { throw error("replace \(file)") }
        ok = true
        let dfd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dfd >= 0 { _ = fsync(dfd); close(dfd) }
    }

    /// The file's bytes, nil when it does not exist; larger than `limit` throws `.tooLarge`.
    public static func read(_ file: String, limit: Int = 1 << 20) throws -> [UInt8]? {
        let fd = open(file, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw error("read \(file)")
        }
        defer { close(fd) }
        var data: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = Glibc.read(fd, &buf, buf.count)
            if n < 0 { if errno == EINTR { continue }; throw error("read \(file)") }
            if n == 0 { break }
            data += buf[0..<n]
            if data.count > limit { throw CastError(.tooLarge, "\(file) is implausibly large; delete it.") }
        }
        return data
    }

    /// errno as "Could not <what>: <reason>." (through `CastError.posix`, the one place).
    public static func error(_ what: String, errno e: Int32 = errno) -> CastError {
        CastError.posix(.io, errno: e) { "Could not \(what): \($0)." }
    }
}
