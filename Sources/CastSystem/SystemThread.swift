import CastCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// OS threads and sleeps for the IO shell only (capture, encode, sockets, the
/// test-pattern painter). castd's own replacement for Foundation's `Thread`, so
/// that the product links FoundationEssentials and not Foundation with its
/// ICU and libcurl (issue 19: those libraries alone were ~30 MiB of RSS).
public enum SystemThread {
    /// Starts `body` on a new detached thread named `name` (the kernel keeps 15
    /// bytes of it: `top -H`, `/proc/PID/task/*/comm`, core dumps). The stack is
    /// the process default (8 MiB of address space, resident only as used), as
    /// Foundation's `Thread` had it.
    public static func start(name: String, _ body: @escaping @Sendable () -> Void) {
        let context = Unmanaged.passRetained(ThreadBody(name: name, body: body)).toOpaque()
        var tid = pthread_t()
        let r = pthread_create(&tid, nil, { raw in
            guard let raw else { return nil }
            let start = Unmanaged<ThreadBody>.fromOpaque(raw).takeRetainedValue()
            SystemThread.setCurrentName(start.name)
            start.body()
            return nil
        }, context)
        // Out of threads (EAGAIN) the body would never run and its owner would wait for it
        // forever; stop with the reason instead of hanging. (Foundation's Thread ignored the failure.)
        guard r == 0 else {
            Unmanaged<ThreadBody>.fromOpaque(context).release()
            fatalError("castd: cannot start thread \(name): \(CastError.posixReason(r))")
        }
        pthread_detach(tid)
    }

    /// Blocks the calling thread for `duration` (nothing when it is zero or
    /// negative); a signal does not cut it short.
    public static func sleep(_ duration: Duration) {
        guard duration > .zero else { return }
        let (s, attos) = duration.components
        var want = timespec(tv_sec: Int(clamping: s), tv_nsec: Int(attos / 1_000_000_000))
        var left = timespec()
        while nanosleep(&want, &left) != 0 && errno == EINTR { want = left }
    }

    private static func setCurrentName(_ name: String) {
        // Linux keeps at most 15 bytes and the NUL (pthread_setname_np(3)); cut on a character boundary.
        var bytes = 0
        var cut = name.startIndex
        for i in name.indices {
            let n = name[i].utf8.count
            if bytes + n > 15 { break }
            bytes += n
            cut = name.index(after: i)
        }
        // pthread_setname_np is not visible to Swift without _GNU_SOURCE; this is what it does on Linux.
        let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var short = String(name[..<cut])
        _ = short.withUTF8 { write(fd, $0.baseAddress, $0.count) }
    }
}

private final class ThreadBody {
    let name: String
    let body: @Sendable () -> Void
    init(name: String, body: @escaping @Sendable () -> Void) { self.name = name; self.body = body }
}
