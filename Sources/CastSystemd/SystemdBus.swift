import CastCore
import CastSystem
import CSystemd
#if canImport(Glibc)
import Glibc
#endif

/// A D-Bus connection through sd-bus: the one place castd calls sd-bus (rule 4,
/// docs/architecture.md), and the one owner of the `sd_bus` handle (`close` or deinit frees it).
/// One thread uses a connection at a time; signal handlers run inside `process()`
/// on that thread.
///
/// sd-bus's variadic helpers cannot be called from Swift, so messages are built
/// (`BusMessageWriter`) and read (`BusMessageReader`) one basic value or container
/// at a time.
public final class SystemdBus: @unchecked Sendable {
    // @unchecked: one owner thread, as sd-bus itself requires.
    private var handle: OpaquePointer?

    /// The session bus at `address`, or the default user bus (`$DBUS_SESSION_BUS_ADDRESS`).
    /// A failure throws `errorCode` with a sentence and the errno.
    public init(address: String?, errorCode: CastError.Code) throws {
        var bus: OpaquePointer? = nil
        var r: Int32
        if let address {
            r = sd_bus_new(&bus)
            if r >= 0 { r = sd_bus_set_address(bus, address) }
            if r >= 0 { r = sd_bus_set_bus_client(bus, 1) }
            if r >= 0 { r = sd_bus_start(bus) }
            if r < 0, let b = bus { sd_bus_unref(b) }
        } else {
            r = sd_bus_open_user(&bus)
        }
        guard r >= 0, let bus else {
            throw CastError.posix(errorCode, errno: -r) {
                "cannot connect to the D-Bus session bus \(address ?? "(DBUS_SESSION_BUS_ADDRESS)"): \($0)"
            }
        }
        handle = bus
    }

    /// Flushes what is queued and leaves the bus. Idempotent.
    public func close() {
        guard let h = handle else { return }
        handle = nil
        sd_bus_flush_close_unref(h)
    }

    deinit { close() }

    /// This connection's unique name on the bus (":1.42").
    public var uniqueName: String? {
        guard let handle else { return nil }
        var unique: UnsafePointer<CChar>? = nil
        guard sd_bus_get_unique_name(handle, &unique) >= 0, let unique else { return nil }
        return String(cString: unique)
    }

    /// A `u` property, nil when it cannot be read.
    public func uint32Property(destination: String, path: String, interface: String, name: String) -> UInt32? {
        var value: UInt32 = 0
        return trivialProperty(destination, path, interface, name, "u", &value) ? value : nil
    }

    /// An `i` property, nil when it cannot be read.
    public func int32Property(destination: String, path: String, interface: String, name: String) -> Int32? {
        var value: Int32 = 0
        return trivialProperty(destination, path, interface, name, "i", &value) ? value : nil
    }

    private func trivialProperty(_ destination: String, _ path: String, _ interface: String, _ name: String,
                                 _ type: Character, _ out: UnsafeMutableRawPointer) -> Bool {
        guard let handle else { return false }
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        return sd_bus_get_property_trivial(handle, destination, path, interface, name, &error, BusType.code(type), out) >= 0
    }

    /// Calls `member` and waits up to `timeout` for its reply; nil on success, else the
    /// error as text ("org.freedesktop.DBus.Error.X: what"). `build` appends the
    /// arguments; `reply` reads the answer (valid only during the call).
    @discardableResult
    public func call(destination: String, path: String, interface: String, member: String, timeout: Duration,
                     build: (BusMessageWriter) -> Void, reply: (BusMessageReader) -> Void = { _ in }) -> String? {
        guard let handle else { return "the bus connection is closed" }
        var m: OpaquePointer? = nil
        var r = sd_bus_message_new_method_call(handle, &m, destination, path, interface, member)
        guard r >= 0, let m else { return "cannot build the \(member) call (\(CastError.posixReason(-r)))" }
        defer { sd_bus_message_unref(m) }
        build(BusMessageWriter(m))
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var answer: OpaquePointer? = nil
        let usec = UInt64(clamping: max(0, timeout.totalNanoseconds / 1000))
        r = sd_bus_call(handle, m, usec, &error, &answer)
        guard r >= 0, let answer else {
            let name = error.name.map { String(cString: $0) } ?? "error"
            let text = error.message.map { String(cString: $0) } ?? CastError.posixReason(-r)
            return "\(name): \(text)"
        }
        defer { sd_bus_message_unref(answer) }
        reply(BusMessageReader(answer))
        return nil
    }

    /// What one `process()` turn did.
    public enum Progress: Equatable, Sendable {
        /// A message was handled (signal handlers may have run); call again.
        case progressed
        /// Nothing was waiting: `wait` for more.
        case idle
        /// The connection failed, with strerror's sentence; it is over.
        case failed(String)
    }

    /// Handles one queued message, running the handlers of matching signals.
    public func process() -> Progress {
        guard let handle else { return .failed("the bus connection is closed") }
        let r = sd_bus_process(handle, nil)
        if r < 0 { return .failed(CastError.posixReason(-r)) }
        return r > 0 ? .progressed : .idle
    }

    /// Blocks until the bus has something, or `timeout` passes (at least 1 µs).
    public func wait(timeout: Duration) {
        guard let handle else { return }
        _ = sd_bus_wait(handle, UInt64(clamping: max(1, timeout.totalNanoseconds / 1000)))
    }

    /// Blocks until the bus has something, `wake` (a descriptor other threads write to, e.g.
    /// `WakePipe.readEnd`) is readable, or `timeout` passes: a bus thread that also takes work
    /// from other threads sleeps until there is some (sd_bus_get_fd(3), sd_bus_get_events(3)).
    public func wait(timeout: Duration, orReadable wake: Int32) {
        guard let handle else { return }
        let fd = sd_bus_get_fd(handle), events = sd_bus_get_events(handle)
        guard fd >= 0, events >= 0 else { return wait(timeout: timeout) }
        var ms = Int32(clamping: max(0, timeout.totalNanoseconds / 1_000_000))
        var due: UInt64 = 0   // sd-bus's own next timeout, absolute CLOCK_MONOTONIC µs
        if sd_bus_get_timeout(handle, &due) >= 0, due != UInt64.max {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            let nowUsec = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
            ms = min(ms, due > nowUsec ? Int32(clamping: (due - nowUsec + 999) / 1000) : 0)
        }
        var fds = [pollfd(fd: fd, events: Int16(events), revents: 0), pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
        _ = poll(&fds, 2, ms)
    }

    /// Subscribes `handler` to a signal (`sender` nil: from anyone); the match lasts
    /// until the returned `BusMatch` is cancelled or released.
    public func matchSignal(sender: String?, path: String, interface: String, member: String,
                            handler: @escaping (BusMessageReader) -> Void) -> Result<BusMatch, BusMatchError> {
        guard let handle else { return .failure(BusMatchError(reason: "the bus connection is closed")) }
        let box = BusMatch.Handler(handler)
        var slot: OpaquePointer? = nil
        let r = sd_bus_match_signal(handle, &slot, sender, path, interface, member, { m, data, _ in
            guard let m, let data else { return 0 }
            Unmanaged<BusMatch.Handler>.fromOpaque(data).takeUnretainedValue().run(BusMessageReader(m))
            return 0
        }, Unmanaged.passUnretained(box).toOpaque())
        guard r >= 0, let slot else { return .failure(BusMatchError(reason: CastError.posixReason(-r))) }
        return .success(BusMatch(slot: slot, handler: box))
    }
}

/// Why a signal subscription failed (strerror's sentence).
public struct BusMatchError: Error, Sendable { public let reason: String }

/// One signal subscription: owns the sd-bus slot and the handler it calls.
public final class BusMatch {
    final class Handler {
        let run: (BusMessageReader) -> Void
        init(_ run: @escaping (BusMessageReader) -> Void) { self.run = run }
    }

    private var slot: OpaquePointer?
    private let handler: Handler   // kept alive while the slot can call it

    init(slot: OpaquePointer, handler: Handler) {
        self.slot = slot
        self.handler = handler
    }

    /// Ends the subscription. Idempotent.
    public func cancel() {
        guard let s = slot else { return }
        slot = nil
        sd_bus_slot_unref(s)
    }

    deinit { cancel() }
}

/// D-Bus type codes (D-Bus specification, "Type System").
enum BusType {
    static func code(_ c: Character) -> CChar { CChar(bitPattern: c.asciiValue ?? 0) }
}

/// A value of an `a{sv}` options dictionary.
public enum BusVariant: Equatable, Sendable {
    case string(String)
    case uint32(UInt32)
    case bool(Bool)
}

/// Appends arguments to a message being built (valid only inside `SystemdBus.call`'s `build`).
public struct BusMessageWriter {
    let m: OpaquePointer
    init(_ m: OpaquePointer) { self.m = m }

    public func appendString(_ s: String) {
        _ = s.withCString { sd_bus_message_append_basic(m, BusType.code("s"), $0) }
    }

    public func appendUInt32(_ v: UInt32) {
        var v = v
        _ = sd_bus_message_append_basic(m, BusType.code("u"), &v)
    }

    public func appendInt32(_ v: Int32) {
        var v = v
        _ = sd_bus_message_append_basic(m, BusType.code("i"), &v)
    }

    /// An `as`.
    public func appendStrings(_ strings: [String]) {
        _ = sd_bus_message_open_container(m, BusType.code("a"), "s")
        for s in strings { appendString(s) }
        _ = sd_bus_message_close_container(m)
    }

    public func appendObjectPath(_ s: String) {
        _ = s.withCString { sd_bus_message_append_basic(m, BusType.code("o"), $0) }
    }

    /// An `a{sv}` of options, keys sorted (deterministic messages).
    public func appendOptions(_ options: [String: BusVariant]) {
        _ = sd_bus_message_open_container(m, BusType.code("a"), "{sv}")
        for (key, value) in options.sorted(by: { $0.key < $1.key }) {
            _ = sd_bus_message_open_container(m, BusType.code("e"), "sv")
            appendString(key)
            switch value {
            case .string(let s):
                _ = sd_bus_message_open_container(m, BusType.code("v"), "s")
                appendString(s)
            case .uint32(var u):
                _ = sd_bus_message_open_container(m, BusType.code("v"), "u")
                _ = sd_bus_message_append_basic(m, BusType.code("u"), &u)
            case .bool(let b):
                var i: Int32 = b ? 1 : 0
                _ = sd_bus_message_open_container(m, BusType.code("v"), "b")
                _ = sd_bus_message_append_basic(m, BusType.code("b"), &i)
            }
            _ = sd_bus_message_close_container(m)
            _ = sd_bus_message_close_container(m)
        }
        _ = sd_bus_message_close_container(m)
    }
}

/// Reads a received message one value at a time (valid only inside the reply or
/// signal handler that got it). Every read returns nil/false at a type mismatch or
/// the end, and never traps on what the peer sent.
public struct BusMessageReader {
    let m: OpaquePointer
    init(_ m: OpaquePointer) { self.m = m }

    public var path: String { sd_bus_message_get_path(m).map { String(cString: $0) } ?? "" }
    public var member: String { sd_bus_message_get_member(m).map { String(cString: $0) } ?? "" }

    public func readUInt32() -> UInt32? {
        var v: UInt32 = 0
        return sd_bus_message_read_basic(m, BusType.code("u"), &v) > 0 ? v : nil
    }

    public func readInt32() -> Int32? {
        var v: Int32 = 0
        return sd_bus_message_read_basic(m, BusType.code("i"), &v) > 0 ? v : nil
    }

    /// A string (`s`) or object path (`o`), as `type` says.
    public func readString(_ type: Character = "s") -> String? {
        var p: UnsafePointer<CChar>? = nil
        guard sd_bus_message_read_basic(m, BusType.code(type), &p) > 0, let p else { return nil }
        return String(cString: p)
    }

    public func readObjectPath() -> String? { readString("o") }

    /// A Unix file descriptor (`h`), duplicated (close-on-exec, ≥ 3): the message owns
    /// the one it carries. Nil when there is none or it cannot be duplicated.
    public func readUnixFD() -> Int32? {
        var raw: Int32 = -1
        guard sd_bus_message_read_basic(m, BusType.code("h"), &raw) > 0, raw >= 0 else { return nil }
        let fd = fcntl(raw, F_DUPFD_CLOEXEC, 3)
        return fd >= 0 ? fd : nil
    }

    /// The signature inside the variant at the read position ("" when it is not a variant).
    public func variantContents() -> String {
        var t: CChar = 0
        var contents: UnsafePointer<CChar>? = nil
        guard sd_bus_message_peek_type(m, &t, &contents) > 0, t == BusType.code("v"), let contents else { return "" }
        return String(cString: contents)
    }

    /// Enters a container (`a`, `r`, `e` or `v`) with the given contents; false when the
    /// next value is not one (or the array is exhausted).
    public func enter(_ type: Character, _ contents: String) -> Bool {
        sd_bus_message_enter_container(m, BusType.code(type), contents) > 0
    }

    public func exit() { _ = sd_bus_message_exit_container(m) }

    /// Skips the next value of signature `types`.
    public func skip(_ types: String) { _ = sd_bus_message_skip(m, types) }
}
