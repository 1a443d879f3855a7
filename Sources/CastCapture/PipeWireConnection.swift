import CastCore
import CastMedia
import CPipeWire
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Where a PipeWire client connects: the session's daemon, or the socket the
/// ScreenCast portal handed out (OpenPipeWireRemote), which only shows the
/// nodes of that cast.
public enum PipeWireRemote: Sendable, Equatable {
    /// `$PIPEWIRE_REMOTE`, else `pipewire-0` in `$XDG_RUNTIME_DIR`.
    case daemon
    /// The daemon's socket at this path (tests run their own daemon).
    case socket(String)
    /// A connected socket. Each connection uses its own `dup` of it; the caller keeps and closes this one.
    case fd(Int32)
}

/// libpipewire wants one `pw_init` per process before anything else. The
/// context made here is never destroyed: it keeps libpipewire's modules and
/// SPA plugins loaded for the life of the process. Without it, destroying the
/// last context unloads them (dlclose) and a loop thread of a context being
/// torn down at the same moment jumped into unmapped code (seen in the tests).
private let pipeWireInitialized: Bool = {
    pw_init(nil, nil)
    if let loop = pw_loop_new(nil) { _ = pw_context_new(loop, nil, 0) }
    return true
}()

/// A thread loop, a context and a core connection: the part every PipeWire
/// client of castd shares (the capture source and the tests' pattern
/// producer). Callbacks of objects made on `core` run on the loop's thread
/// with the loop lock held; any other thread calls `withLock` around
/// libpipewire calls. Owners call `shutDown` from their own thread (never
/// from a callback, whose `Unmanaged` reference must not be the last one).
final class PipeWireConnection: @unchecked Sendable {
    // @unchecked: the pw objects are used only under the loop lock (libpipewire's rule).
    let loop: OpaquePointer
    let context: OpaquePointer
    let core: OpaquePointer
    private let coreHook: UnsafeMutablePointer<spa_hook>
    private let coreEvents: UnsafeMutablePointer<pw_core_events>
    /// A fatal error the daemon reported about the connection (then the streams are dead too).
    private let failure = Mutex<String?>(nil)
    /// Called (on the loop thread) when `failure` is set.
    private let onFailure: @Sendable (String) -> Void

    /// Connects; `what` names the client in errors ("capture", "pattern producer").
    init(remote: PipeWireRemote, onFailure: @escaping @Sendable (String) -> Void) throws {
        // No daemon socket: fail before libpipewire is initialised, so that a castd with
        // nothing to connect to (X11 capture, `--audio auto`, no PipeWire) does not load its
        // modules and SPA plugins (issue 19: 2.2 MiB resident).
        if case .daemon = remote, Self.daemonSocketCandidates().allSatisfy({ access($0, F_OK) != 0 }) {
            let dir = getenv("XDG_RUNTIME_DIR").map { String(cString: $0) } ?? "(XDG_RUNTIME_DIR unset)"
            throw CastError.posix(.capture, errno: ENOENT) { "PipeWire: cannot connect to the daemon (\($0)); is pipewire running in this session (socket pipewire-0 in \(dir))?" }
        }
        _ = pipeWireInitialized
        self.onFailure = onFailure
        guard let loop = pw_thread_loop_new("castd-pipewire", nil) else {
            throw CastError.posix(.capture) { "PipeWire: cannot create a thread loop (\($0))" }
        }
        guard let context = pw_context_new(pw_thread_loop_get_loop(loop), nil, 0) else {
            pw_thread_loop_destroy(loop)
            throw CastError.posix(.capture) { "PipeWire: cannot create a context (\($0))" }
        }
        guard pw_thread_loop_start(loop) >= 0 else {
            pw_context_destroy(context)
            pw_thread_loop_destroy(loop)
            throw CastError(.capture, "PipeWire: cannot start the thread loop")
        }
        pw_thread_loop_lock(loop)
        var core: OpaquePointer? = nil
        var connectErrno: Int32 = 0
        switch remote {
        case .daemon:
            core = pw_context_connect(context, nil, 0)
            connectErrno = errno
        case .socket(let path):
            let mine = Self.connectUnix(path)
            if mine >= 0 {
                core = pw_context_connect_fd(context, mine, nil, 0)
            }
            connectErrno = errno
        case .fd(let fd):
            let mine = dup(fd)
            if mine >= 0 {
                core = pw_context_connect_fd(context, mine, nil, 0)   // owns `mine`, also on failure
                connectErrno = errno
            } else {
                connectErrno = errno
            }
        }
        guard let core else {
            pw_thread_loop_unlock(loop)
            pw_thread_loop_stop(loop)
            pw_context_destroy(context)
            pw_thread_loop_destroy(loop)
            switch remote {
            case .daemon:
                let dir = getenv("XDG_RUNTIME_DIR").map { String(cString: $0) } ?? "(XDG_RUNTIME_DIR unset)"
                throw CastError.posix(.capture, errno: connectErrno) { "PipeWire: cannot connect to the daemon (\($0)); is pipewire running in this session (socket pipewire-0 in \(dir))?" }
            case .socket(let path):
                throw CastError.posix(.capture, errno: connectErrno) { "PipeWire: cannot connect to the daemon's socket \(path) (\($0))" }
            case .fd(let fd):
                throw CastError.posix(.capture, errno: connectErrno) { "PipeWire: cannot connect through the portal's socket (fd \(fd): \($0))" }
            }
        }
        self.loop = loop
        self.context = context
        self.core = core
        coreHook = .cell(spa_hook())
        coreEvents = .cell(pw_core_events())
        coreEvents.pointee.version = UInt32(PW_VERSION_CORE_EVENTS)
        coreEvents.pointee.error = { data, id, _, res, message in
            guard let data, id == 0 else { return }   // PW_ID_CORE: the connection itself
            let me = Unmanaged<PipeWireConnection>.fromOpaque(data).takeUnretainedValue()
            let text = message.map { String(cString: $0) } ?? "unknown error"
            me.fail("PipeWire: the daemon reported an error on the connection: \(text) (\(CastError.posixReason(-res)))")
        }
        _ = castd_pw_core_add_listener(core, coreHook, coreEvents, Unmanaged.passUnretained(self).toOpaque())
        pw_thread_loop_unlock(loop)
    }

    /// A connected Unix stream socket, or -1 with errno set.
    /// Every path libpipewire might connect to for `.daemon` (libpipewire 0.3's
    /// protocol-native: each name of `$PIPEWIRE_REMOTE` (comma-separated), else
    /// `pipewire-0`, taken as it is when absolute, else in `$PIPEWIRE_RUNTIME_DIR`,
    /// `$XDG_RUNTIME_DIR`, `$USERPROFILE` or `/run/pipewire`). More candidates than it
    /// tries is harmless: an absent one only means libpipewire is initialised and fails.
    static func daemonSocketCandidates(environment get: (String) -> String? = { getenv($0).map { String(cString: $0) } }) -> [String] {
        let names = (get("PIPEWIRE_REMOTE").flatMap { $0.isEmpty ? nil : $0 } ?? "pipewire-0")
            .split(separator: ",").map(String.init)
        let dirs = ["PIPEWIRE_RUNTIME_DIR", "XDG_RUNTIME_DIR", "USERPROFILE"].compactMap { get($0) }.filter { !$0.isEmpty }
            + ["/run/pipewire"]
        return names.flatMap { name in name.hasPrefix("/") ? [name] : dirs.map { "\($0)/\(name)" } }
    }

    static func connectUnix(_ path: String) -> Int32 {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else {
            errno = ENAMETOOLONG
            return -1
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { p in
            for (i, b) in bytes.enumerated() { p[i] = b }
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return -1 }
        let r = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if r < 0 {
            let e = errno
            close(fd)
            errno = e
            return -1
        }
        return fd
    }

    private func fail(_ message: String) {
        let first = failure.withLock { f -> Bool in
            guard f == nil else { return false }
            f = message
            return true
        }
        if first { onFailure(message) }
    }

    var failureMessage: String? { failure.withLock { $0 } }

    /// Runs `body` holding the loop lock (not from a callback: those hold it already).
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pw_thread_loop_lock(loop)
        defer { pw_thread_loop_unlock(loop) }
        return try body()
    }

    private var isShutDown = false

    /// Stops the loop thread first (no callback runs after that), then lets
    /// the owner destroy its streams and proxies in `destroy`, then closes the
    /// connection and frees the context. Idempotent; `deinit` does it too.
    func shutDown(destroy: () -> Void = {}) {
        guard !isShutDown else { return }
        // From the loop's own thread the loop cannot be stopped (joined); owners
        // shut down from their thread, so this only guards against misuse.
        guard !pw_thread_loop_in_thread(loop) else { return }
        isShutDown = true
        pw_thread_loop_stop(loop)
        destroy()
        spa_hook_remove(coreHook)
        pw_core_disconnect(core)
        pw_context_destroy(context)
        pw_thread_loop_destroy(loop)
        coreHook.deallocate()
        coreEvents.deallocate()
    }

    deinit { shutDown() }
}

/// Builds SPA pods into a scratch buffer and hands them to libpipewire as the
/// `const struct spa_pod **` array it wants.
struct PodList {
    private var storage: [UnsafeMutablePointer<UInt8>] = []
    private(set) var pods: [UnsafePointer<spa_pod>?] = []

    /// `build` writes one pod into the given buffer (4 KiB) and returns it, or nil when it did not fit.
    mutating func add(_ build: (UnsafeMutablePointer<UInt8>, UInt32) -> UnsafePointer<spa_pod>?) {
        let buf = UnsafeMutablePointer<UInt8>.allocate(capacity: 4096)
        storage.append(buf)
        if let pod = build(buf, 4096) { pods.append(pod) }
    }

    /// Calls `body` with the array (valid only during the call).
    func withPods<T>(_ body: (UnsafeMutablePointer<UnsafePointer<spa_pod>?>, UInt32) -> T) -> T {
        var copy = pods
        return copy.withUnsafeMutableBufferPointer { body($0.baseAddress!, UInt32($0.count)) }
    }

    func free() { for b in storage { b.deallocate() } }
}

/// The SPA video formats castd reads, in preference order, and what they mean in castd's terms.
enum PipeWireFormats {
    /// Alpha is ignored: BGRA is read as BGRx, RGBA as RGBx.
    static let accepted: [(spa: UInt32, format: PixelFormat)] = [
        (SPA_VIDEO_FORMAT_BGRx.rawValue, .bgrx),
        (SPA_VIDEO_FORMAT_RGBx.rawValue, .rgbx),
        (SPA_VIDEO_FORMAT_BGRA.rawValue, .bgrx),
        (SPA_VIDEO_FORMAT_RGBA.rawValue, .rgbx),
    ]

    static func pixelFormat(spa: UInt32) -> PixelFormat? { accepted.first { $0.spa == spa }?.format }

    static func name(spa: UInt32) -> String {
        switch spa {
        case SPA_VIDEO_FORMAT_BGRx.rawValue: return "BGRx"
        case SPA_VIDEO_FORMAT_RGBx.rawValue: return "RGBx"
        case SPA_VIDEO_FORMAT_BGRA.rawValue: return "BGRA"
        case SPA_VIDEO_FORMAT_RGBA.rawValue: return "RGBA"
        default: return "SPA video format \(spa)"
        }
    }
}

extension UnsafeMutablePointer {
    /// A heap cell holding `value` (the C structs libpipewire keeps pointers to); the owner deallocates it.
    static func cell(_ value: Pointee) -> Self {
        let p = Self.allocate(capacity: 1)
        p.initialize(to: value)
        return p
    }
}

/// One `pw_stream` and the cells libpipewire keeps pointers to while it lives (its listener
/// hook and event table): the one place the capture sources and the pattern producer make,
/// connect and tear down a stream. Owned by one object, which creates and connects it with
/// the loop locked, destroys it in `PipeWireConnection.shutDown`'s body and frees the cells
/// once nothing can call back.
struct PipeWireStream {
    private(set) var pointer: OpaquePointer? = nil
    private let hook: UnsafeMutablePointer<spa_hook> = .cell(spa_hook())
    private let events: UnsafeMutablePointer<pw_stream_events> = .cell(pw_stream_events())

    /// Creates the stream on `core`, named `name`, with `properties` ("key=value …"), and
    /// listens to it with the callbacks `setEvents` fills in, each called with `userData`.
    /// nil when PipeWire refuses (errno says why).
    mutating func create(core: OpaquePointer, name: String, properties: String, userData: UnsafeMutableRawPointer,
                         events setEvents: (inout pw_stream_events) -> Void) -> OpaquePointer? {
        guard let s = pw_stream_new(core, name, pw_properties_new_string(properties)) else { return nil }
        pointer = s
        events.pointee.version = UInt32(PW_VERSION_STREAM_EVENTS)
        setEvents(&events.pointee)
        pw_stream_add_listener(s, hook, events, userData)
        return s
    }

    /// Connects the stream to `target` (`UInt32.max`: any) offering `params`: PipeWire's
    /// result, a negative errno on failure.
    func connect(_ direction: spa_direction, target: UInt32, flags: pw_stream_flags, params: PodList) -> Int32 {
        guard let pointer else { return -EINVAL }
        return params.withPods { pw_stream_connect(pointer, direction, target, flags, $0, $1) }
    }

    /// Takes the stream out of the graph and frees it: its listener first (no callback
    /// after this), then the stream. Call from `shutDown`'s body; a second call does nothing.
    mutating func destroy() {
        guard let s = pointer else { return }
        spa_hook_remove(hook)
        pw_stream_disconnect(s)
        pw_stream_destroy(s)
        pointer = nil
    }

    /// Frees the cells, once, when no stream uses them any more (after `destroy` and the
    /// loop's stop, or when none was made).
    func deallocate() {
        hook.deallocate()
        events.deallocate()
    }
}

/// The core's registry with one listener, kept like `PipeWireStream`: the capture sources
/// watch it for the nodes that come and go (the end of a cast, the sinks audio follows).
struct PipeWireRegistry {
    private var pointer: OpaquePointer? = nil
    private let hook: UnsafeMutablePointer<spa_hook> = .cell(spa_hook())
    private let events: UnsafeMutablePointer<pw_registry_events> = .cell(pw_registry_events())

    /// Gets the registry of `core` (the loop locked) and listens to it with the callbacks
    /// `setEvents` fills in, each called with `userData`; nothing when PipeWire has none.
    mutating func listen(core: OpaquePointer, userData: UnsafeMutableRawPointer,
                         events setEvents: (inout pw_registry_events) -> Void) {
        guard let r = castd_pw_core_get_registry(core) else { return }
        pointer = r
        events.pointee.version = castd_pw_version_registry_events()
        setEvents(&events.pointee)
        _ = castd_pw_registry_add_listener(r, hook, events, userData)
    }

    /// Removes the listener and lets the registry go; from `shutDown`'s body, idempotent.
    mutating func destroy() {
        guard let r = pointer else { return }
        spa_hook_remove(hook)
        castd_pw_registry_destroy(r)
        pointer = nil
    }

    /// Frees the cells, once, after `destroy` and the loop's stop.
    func deallocate() {
        hook.deallocate()
        events.deallocate()
    }
}
