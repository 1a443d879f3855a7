import CastCore
import CastSystem
import CastWebRTC
import Dispatch
import FoundationEssentials
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The IO shell around one `DatagramCore`: a thread that owns the core and its
/// UDP sockets (and TURN servers' TCP/TLS connections, `TURNStreamSocket`), polls them, and
/// drives the core by the one sans-IO contract (`SansIO`): each datagram in as
/// `handle(.datagram…, now:)`, the deadline as `handleTimeout(now:)`, then `poll()` until nil,
/// sending each `.transmit` and handing each `.event` to `onEvent`. Other threads reach the core only through `perform`, which runs
/// a closure on the driver's thread — so the core has exactly one owner and
/// no lock ever guards protocol state (rule 2, docs/architecture.md). The only lock here
/// guards the mailbox of closures.
public final class DatagramDriver<Core: DatagramCore>: @unchecked Sendable {
    public typealias Work = (inout Core, Instant) -> Void

    private var core: Core
    private var sockets: [any DatagramSocket]
    private let clock: MonotonicClock
    /// A self-pipe: `perform` writes a byte to wake the poll.
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let mailbox = Mutex(Mailbox())
    private let finished = DispatchSemaphore(value: 0)
    private var started = false             // start/stop are called by the owner, not the driver thread
    private var stopping = false            // read and written on the driver thread only
    public private(set) var sendFailures = 0 // driver thread only

    /// Called on the driver's thread for each event the core decided, in order.
    private let onEvent: ((Core.Event) -> Void)?
    /// Called on the driver's thread after every turn (mailbox work, datagrams,
    /// timeouts) once the outputs are drained, so the owner can read the core's state.
    private let afterTurn: ((inout Core) -> Void)?

    public init(core: Core, sockets: [any DatagramSocket], clock: MonotonicClock,
                onEvent: ((Core.Event) -> Void)? = nil, afterTurn: ((inout Core) -> Void)? = nil) throws {
        self.core = core
        self.onEvent = onEvent
        self.afterTurn = afterTurn
        self.sockets = sockets
        self.clock = clock
        var p: [Int32] = [0, 0]
        guard pipe(&p) == 0 else { throw CastError.posix("pipe") }
        for fd in p {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        wakeRead = p[0]
        wakeWrite = p[1]
    }

    deinit {
        close(wakeRead)
        close(wakeWrite)
    }

    /// Runs `work` on the driver's thread with the core and the current time.
    public func perform(_ work: @escaping Work) {
        mailbox.withLock { $0.work.append(work) }
        wake()
    }

    private func wake() {
        var one: UInt8 = 1
        _ = write(wakeWrite, &one, 1)   // a full pipe already means "wake up"
    }

    /// Starts the thread.
    public func start() {
        started = true
        SystemThread.start(name: "castd-peer") { [self] in
            loop()
            finished.signal()
        }
    }

    /// Stops the loop after the work queued so far, and waits for the thread.
    public func stop() {
        guard started else { return }
        started = false
        mailbox.withLock { $0.work.append({ [unowned self] _, _ in self.stopping = true }) }
        wake()
        finished.wait()
    }

    private func takeMailbox() -> [Work] {
        mailbox.withLock { m in
            defer { m.work.removeAll(keepingCapacity: true) }
            return m
        }.work
    }

    /// The closures other threads queue for the driver's thread. They are not `Sendable`
    /// (they reach the core), but only the driver's thread runs them; the mutex hands them
    /// over, so the box may cross threads.
    private struct Mailbox: @unchecked Sendable {
        var work: [Work] = []
    }

    private func flush() {
        while let o = core.poll() {
            switch o {
            case .transmit(let t):
                guard let s = sockets.first(where: { $0.local == t.from })
                        ?? sockets.first(where: { !($0 is TURNStreamSocket) && $0.local.ip.isIPv6 == t.to.ip.isIPv6 }) else {
                    sendFailures += 1
                    continue
                }
                if !s.send(t.bytes, to: t.to) { sendFailures += 1 }
                // Sent (or not): the core may build a later datagram in these bytes (issue 19).
                // The output lets go of them at the end of this turn of the loop, before the
                // core next writes; a socket that queued them keeps its own copy's bytes.
                core.recycle(t.bytes)
            case .event(let e):
                onEvent?(e)
            }
        }
        afterTurn?(&core)
    }

    private func loop() {
        var fds = sockets.map { pollfd(fd: $0.fd, events: $0.pollEvents, revents: 0) }
        fds.append(pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0))
        var closedReported = [Bool](repeating: false, count: sockets.count)
        let bufferSize = 2048
        var buffer = [UInt8](repeating: 0, count: bufferSize)
        // What restores the buffer's length: an array, since an unoptimised generic append allocates per element.
        let zeros = [UInt8](repeating: 0, count: bufferSize)
        while !stopping {
            for w in takeMailbox() { w(&core, clock.now()) }
            flush()
            if stopping { break }
            var timeoutMs: Int32 = 1000
            if let d = core.nextDeadline() {
                let wait = d - clock.now()
                timeoutMs = wait <= .zero ? 0 : Int32(min(1000, (wait.totalNanoseconds + 999_999) / 1_000_000))
            }
            for i in fds.indices { fds[i].revents = 0 }
            // A stream socket's interest changes (connecting, bytes waiting); a closed one is not polled.
            for (i, s) in sockets.enumerated() { fds[i].events = s.pollEvents; if closedReported[i] { fds[i].fd = -1 } }
            let n = poll(&fds, nfds_t(fds.count), timeoutMs)
            if n < 0 && errno != EINTR { break }
            if fds[fds.count - 1].revents != 0 {
                var drain = [UInt8](repeating: 0, count: 64)
                while read(wakeRead, &drain, drain.count) > 0 {}
            }
            for (i, s) in sockets.enumerated() where fds[i].revents != 0 {
                s.ready(fds[i].revents)
                // Drain the socket: a keyframe's worth of RTCP or checks may be waiting.
                while let (count, from) = s.receive(into: &buffer) {
                    // The receive buffer itself goes in, cut to the datagram (issue 19: no
                    // copy per datagram). A core that keeps the bytes makes the restore
                    // below copy them first (copy on write); otherwise the same memory
                    // takes the next datagram.
                    buffer.removeLast(buffer.count - count)
                    core.handle(.datagram(buffer, from: from, to: s.local), now: clock.now())
                    buffer.append(contentsOf: zeros[buffer.count...])
                }
            }
            // A TURN server's TCP/TLS connection that ended (while reading, or while sending
            // in an earlier turn): the core hears it once.
            for (i, s) in sockets.enumerated() where !closedReported[i] {
                guard let reason = s.closeReason else { continue }
                closedReported[i] = true
                core.handle(.socketClosed(local: s.local, reason: reason), now: clock.now())
            }
            let now = clock.now()
            if let d = core.nextDeadline(), now >= d { core.handleTimeout(now: now) }
            flush()
        }
    }
}
