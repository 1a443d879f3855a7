import CastCore
import CSystemd
#if canImport(Glibc)
import Glibc
#endif

/// Whether a D-Bus session bus answers (the portal and Mutter live there).
public enum SessionBusProbe {
    public static func available() -> Bool {
        var bus: OpaquePointer? = nil
        let r = sd_bus_open_user(&bus)
        if r >= 0, let bus { sd_bus_flush_close_unref(bus) }
        return r >= 0
    }
}

/// The few sd-bus operations castd's portal clients need, with errors as
/// sentences. sd-bus's variadic helpers cannot be called from Swift, so
/// messages are built and read one basic value or container at a time.
enum SDBus {
    enum Variant: Equatable {
        case string(String)
        case uint32(UInt32)
        case bool(Bool)
    }

    static func type(_ c: Character) -> CChar { CChar(UInt8(ascii: c.unicodeScalars.first!)) }

    /// The session bus at `address`, or the default user bus (`$DBUS_SESSION_BUS_ADDRESS`).
    static func open(address: String?) throws -> OpaquePointer {
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
            throw CastError(.capture, "cannot connect to the D-Bus session bus \(address ?? "(DBUS_SESSION_BUS_ADDRESS)"): \(String(cString: strerror(-r)))")
        }
        return bus
    }

    /// The session bus for a probe, or the sentence `castd doctor` shows when there is none.
    static func openForProbe(address: String?) -> Result<OpaquePointer, ProbeFailure> {
        do { return .success(try open(address: address)) } catch {
            return .failure(ProbeFailure(sentence: "there is no D-Bus session bus (\((error as? CastError)?.message ?? "\(error)"))"))
        }
    }

    struct ProbeFailure: Error { let sentence: String }

    /// A `u` property of the portal, nil when it cannot be read.
    static func uint32Property(_ bus: OpaquePointer, path: String, interface: String, name: String) -> UInt32? {
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var value: UInt32 = 0
        let r = sd_bus_get_property_trivial(bus, ScreenCastPortal.service, path, interface, name, &error, type("u"), &value)
        return r >= 0 ? value : nil
    }

    /// Calls `member` on the portal service; nil on success, else the error as text.
    @discardableResult
    static func call(_ bus: OpaquePointer, destination: String = ScreenCastPortal.service, path: String, interface: String,
                     member: String, timeout: Duration,
                     build: (OpaquePointer) -> Void, reply: (OpaquePointer) -> Void = { _ in }) -> String? {
        var m: OpaquePointer? = nil
        var r = sd_bus_message_new_method_call(bus, &m, destination, path, interface, member)
        guard r >= 0, let m else { return "cannot build the \(member) call (\(String(cString: strerror(-r))))" }
        defer { sd_bus_message_unref(m) }
        build(m)
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var answer: OpaquePointer? = nil
        r = sd_bus_call(bus, m, UInt64(timeout.components.seconds) * 1_000_000, &error, &answer)
        guard r >= 0, let answer else {
            let name = error.name.map { String(cString: $0) } ?? "error"
            let text = error.message.map { String(cString: $0) } ?? String(cString: strerror(-r))
            return "\(name): \(text)"
        }
        defer { sd_bus_message_unref(answer) }
        reply(answer)
        return nil
    }

    static func appendString(_ m: OpaquePointer, _ s: String) {
        _ = s.withCString { sd_bus_message_append_basic(m, type("s"), $0) }
    }

    static func appendObjectPath(_ m: OpaquePointer, _ s: String) {
        _ = s.withCString { sd_bus_message_append_basic(m, type("o"), $0) }
    }

    /// An `a{sv}` of options, keys sorted (deterministic messages).
    static func appendOptions(_ m: OpaquePointer, _ options: [String: Variant]) {
        _ = sd_bus_message_open_container(m, type("a"), "{sv}")
        for (key, value) in options.sorted(by: { $0.key < $1.key }) {
            _ = sd_bus_message_open_container(m, type("e"), "sv")
            appendString(m, key)
            switch value {
            case .string(let s):
                _ = sd_bus_message_open_container(m, type("v"), "s")
                appendString(m, s)
            case .uint32(var u):
                _ = sd_bus_message_open_container(m, type("v"), "u")
                _ = sd_bus_message_append_basic(m, type("u"), &u)
            case .bool(let b):
                var i: Int32 = b ? 1 : 0
                _ = sd_bus_message_open_container(m, type("v"), "b")
                _ = sd_bus_message_append_basic(m, type("b"), &i)
            }
            _ = sd_bus_message_close_container(m)
            _ = sd_bus_message_close_container(m)
        }
        _ = sd_bus_message_close_container(m)
    }

    static func readObjectPath(_ m: OpaquePointer) -> String? {
        var p: UnsafePointer<CChar>? = nil
        guard sd_bus_message_read_basic(m, type("o"), &p) > 0, let p else { return nil }
        return String(cString: p)
    }

    private static func readString(_ m: OpaquePointer, _ t: Character) -> String? {
        var p: UnsafePointer<CChar>? = nil
        guard sd_bus_message_read_basic(m, type(t), &p) > 0, let p else { return nil }
        return String(cString: p)
    }

    /// The signature inside the variant at the read position ("" when it is not a variant).
    private static func variantContents(_ m: OpaquePointer) -> String {
        var t: CChar = 0
        var contents: UnsafePointer<CChar>? = nil
        guard sd_bus_message_peek_type(m, &t, &contents) > 0, t == type("v"), let contents else { return "" }
        return String(cString: contents)
    }

    /// A variant holding a string or object path; skipped (nil) otherwise.
    private static func readVariantString(_ m: OpaquePointer) -> String? {
        let c = variantContents(m)
        guard c == "s" || c == "o", sd_bus_message_enter_container(m, type("v"), c) > 0 else {
            _ = sd_bus_message_skip(m, "v")
            return nil
        }
        defer { _ = sd_bus_message_exit_container(m) }
        return readString(m, c.first!)
    }

    /// A variant holding `a(ua{sv})`: Start's streams. Unknown properties are skipped.
    private static func readStreams(_ m: OpaquePointer) -> [PortalStream] {
        guard variantContents(m) == "a(ua{sv})", sd_bus_message_enter_container(m, type("v"), "a(ua{sv})") > 0 else {
            _ = sd_bus_message_skip(m, "v")
            return []
        }
        defer { _ = sd_bus_message_exit_container(m) }
        var out: [PortalStream] = []
        guard sd_bus_message_enter_container(m, type("a"), "(ua{sv})") > 0 else { return [] }
        while sd_bus_message_enter_container(m, type("r"), "ua{sv}") > 0 {
            var node: UInt32 = 0
            _ = sd_bus_message_read_basic(m, type("u"), &node)
            var stream = PortalStream(node: node)
            if sd_bus_message_enter_container(m, type("a"), "{sv}") > 0 {
                while sd_bus_message_enter_container(m, type("e"), "sv") > 0 {
                    let key = readString(m, "s") ?? ""
                    let c = variantContents(m)
                    if key == "size", c == "(ii)", sd_bus_message_enter_container(m, type("v"), c) > 0 {
                        if sd_bus_message_enter_container(m, type("r"), "ii") > 0 {
                            var w: Int32 = 0, h: Int32 = 0
                            _ = sd_bus_message_read_basic(m, type("i"), &w)
                            _ = sd_bus_message_read_basic(m, type("i"), &h)
                            stream.width = Int(w)
                            stream.height = Int(h)
                            _ = sd_bus_message_exit_container(m)
                        }
                        _ = sd_bus_message_exit_container(m)
                    } else if key == "source_type", c == "u", sd_bus_message_enter_container(m, type("v"), c) > 0 {
                        var u: UInt32 = 0
                        _ = sd_bus_message_read_basic(m, type("u"), &u)
                        stream.sourceType = u
                        _ = sd_bus_message_exit_container(m)
                    } else {
                        _ = sd_bus_message_skip(m, "v")
                    }
                    _ = sd_bus_message_exit_container(m)
                }
                _ = sd_bus_message_exit_container(m)
            }
            _ = sd_bus_message_exit_container(m)
            out.append(stream)
        }
        _ = sd_bus_message_exit_container(m)
        return out
    }

    /// A Request's `Response(u response, a{sv} results)` signal as a machine event.
    static func parseResponse(_ m: OpaquePointer) -> ScreenCastPortalMachine.Event {
        let path = sd_bus_message_get_path(m).map { String(cString: $0) } ?? ""
        var code: UInt32 = 2
        guard sd_bus_message_read_basic(m, type("u"), &code) > 0 else {
            return .response(path: path, code: 2, sessionHandle: nil, streams: [], restoreToken: nil)
        }
        var session: String? = nil, token: String? = nil, streams: [PortalStream] = []
        if sd_bus_message_enter_container(m, type("a"), "{sv}") > 0 {
            while sd_bus_message_enter_container(m, type("e"), "sv") > 0 {
                switch readString(m, "s") ?? "" {
                case "session_handle": session = readVariantString(m)
                case "restore_token": token = readVariantString(m)
                case "streams": streams = readStreams(m)
                default: _ = sd_bus_message_skip(m, "v")
                }
                _ = sd_bus_message_exit_container(m)
            }
            _ = sd_bus_message_exit_container(m)
        }
        return .response(path: path, code: code, sessionHandle: session, streams: streams, restoreToken: token)
    }
}
