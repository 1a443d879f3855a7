#if canImport(Glibc)
import Glibc
#endif

/// A self-pipe that wakes a thread sleeping in poll(2): other threads `wake()` it after
/// queueing work; the sleeper polls `readEnd` beside its own descriptors and `drain()`s it.
/// Both ends are non-blocking and close-on-exec.
public final class WakePipe: @unchecked Sendable {
    public let readEnd: Int32
    private let writeEnd: Int32

    public init() throws {
        var p: [Int32] = [-1, -1]
        guard pipe(&p) == 0 else { throw PrivateFile.error("create a pipe") }
        for fd in p {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        (readEnd, writeEnd) = (p[0], p[1])
    }

    deinit {
        close(readEnd)
        close(writeEnd)
    }

    public func wake() {
        var one: UInt8 = 1
        _ = write(writeEnd, &one, 1)   // a full pipe already means "wake up"
    }

    /// Empties the pipe (after a wake-up, before looking at the queued work).
    public func drain() {
        var buf = [UInt8](repeating: 0, count: 64)
        while read(readEnd, &buf, buf.count) > 0 {}
    }
}
