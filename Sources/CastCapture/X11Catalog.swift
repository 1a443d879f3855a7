import CastCore
import CastMedia
import CX11

/// A RandR output as `castd doctor` lists it and `--output` picks it.
public struct X11Output: Equatable, Sendable {
    public var name: String
    /// Where it shows the root window; nil when it is connected but has no CRTC (off).
    public var area: FrameRect?
    public var primary: Bool

    public init(name: String, area: FrameRect?, primary: Bool) {
        self.name = name
        self.area = area
        self.primary = primary
    }

    /// `HDMI-1 1920x1080+0+0 primary`.
    public var summary: String {
        "\(name) " + (area.map { "\($0)" } ?? "off") + (primary ? " primary" : "")
    }
}

/// What an X server offers to share (issue 31): its outputs and its top-level windows.
enum X11Catalog {
    /// Connected RandR outputs, in the server's order.
    static func outputs(_ dpy: OpaquePointer, root: Window) -> [X11Output] {
        guard let res = XRRGetScreenResourcesCurrent(dpy, root) else { return [] }
        defer { XRRFreeScreenResources(res) }
        let primary = XRRGetOutputPrimary(dpy, root)
        var out: [X11Output] = []
        for i in 0..<Int(res.pointee.noutput) {
            let id = res.pointee.outputs[i]
            guard let info = XRRGetOutputInfo(dpy, res, id) else { continue }
            defer { XRRFreeOutputInfo(info) }
            guard info.pointee.connection == RR_Connected else { continue }
            var area: FrameRect? = nil
            if info.pointee.crtc != 0, let crtc = XRRGetCrtcInfo(dpy, res, info.pointee.crtc) {
                area = FrameRect(x: Int(crtc.pointee.x), y: Int(crtc.pointee.y),
                                 width: Int(crtc.pointee.width), height: Int(crtc.pointee.height))
                XRRFreeCrtcInfo(crtc)
            }
            out.append(X11Output(name: String(cString: info.pointee.name), area: area, primary: id == primary))
        }
        return out
    }

    /// The top-level windows a person would call windows: the window manager's client list
    /// (`_NET_CLIENT_LIST`) when there is one; otherwise the root's mapped, titled InputOutput
    /// children that are not override-redirect (menus, tooltips), or their titled child
    /// (a window manager's frame around a client). Stacking order, bottom first.
    static func windows(_ dpy: OpaquePointer, root: Window) -> [X11Window] {
        var candidates = clientList(dpy, root: root)
        if candidates.isEmpty {
            for child in children(dpy, of: root) {
                var a = XWindowAttributes()
                guard XGetWindowAttributes(dpy, child, &a) != 0, a.`class` == InputOutput,
                      a.override_redirect == 0, a.map_state == IsViewable else { continue }
                if title(dpy, child) != nil { candidates.append(child); continue }
                if let inner = children(dpy, of: child).first(where: { title(dpy, $0) != nil }) { candidates.append(inner) }
            }
        }
        return candidates.compactMap { describe(dpy, $0, root: root) }
    }

    /// One window's title, root position, size and whether it is mapped; nil when it is gone or untitled.
    static func describe(_ dpy: OpaquePointer, _ w: Window, root: Window) -> X11Window? {
        var a = XWindowAttributes()
        guard XGetWindowAttributes(dpy, w, &a) != 0, let name = title(dpy, w) else { return nil }
        var x: Int32 = 0, y: Int32 = 0
        var child: Window = 0
        XTranslateCoordinates(dpy, w, root, 0, 0, &x, &y, &child)
        return X11Window(id: UInt(w), title: name,
                         frame: FrameRect(x: Int(x), y: Int(y), width: Int(a.width), height: Int(a.height)),
                         mapped: a.map_state == IsViewable)
    }

    /// `_NET_WM_NAME` (UTF-8), else `WM_NAME`; nil when neither is set or it is empty.
    static func title(_ dpy: OpaquePointer, _ w: Window) -> String? {
        let utf8 = XInternAtom(dpy, "UTF8_STRING", 0)
        if let bytes = property(dpy, w, XInternAtom(dpy, "_NET_WM_NAME", 0), type: utf8, format: 8), !bytes.isEmpty {
            return String(decoding: bytes, as: UTF8.self)
        }
        var name: UnsafeMutablePointer<CChar>? = nil
        guard XFetchName(dpy, w, &name) != 0, let name else { return nil }
        defer { XFree(name) }
        let s = String(cString: name)
        return s.isEmpty ? nil : s
    }

    private static func clientList(_ dpy: OpaquePointer, root: Window) -> [Window] {
        guard let bytes = property(dpy, root, XInternAtom(dpy, "_NET_CLIENT_LIST_STACKING", 0), type: Atom(XA_WINDOW), format: 32)
                ?? property(dpy, root, XInternAtom(dpy, "_NET_CLIENT_LIST", 0), type: Atom(XA_WINDOW), format: 32)
        else { return [] }
        // Format 32 comes as C longs.
        return bytes.withUnsafeBytes { raw in raw.bindMemory(to: UInt.self).map { Window($0) } }
    }

    private static func children(_ dpy: OpaquePointer, of w: Window) -> [Window] {
        var rootReturn: Window = 0, parent: Window = 0
        var list: UnsafeMutablePointer<Window>? = nil
        var count: UInt32 = 0
        guard XQueryTree(dpy, w, &rootReturn, &parent, &list, &count) != 0, let list else { return [] }
        defer { XFree(list) }
        return (0..<Int(count)).map { list[$0] }
    }

    /// A property's bytes (format 32 items are C longs, as Xlib returns them); nil when absent or of another type.
    private static func property(_ dpy: OpaquePointer, _ w: Window, _ atom: Atom, type: Atom, format: Int32) -> [UInt8]? {
        var actualType: Atom = 0
        var actualFormat: Int32 = 0
        var items: UInt = 0, after: UInt = 0
        var data: UnsafeMutablePointer<UInt8>? = nil
        guard XGetWindowProperty(dpy, w, atom, 0, 1 << 20, 0, type, &actualType, &actualFormat, &items, &after, &data) == Success,
              let data else { return nil }
        defer { XFree(data) }
        guard actualType == type, actualFormat == format else { return nil }
        let itemSize = format == 32 ? MemoryLayout<UInt>.size : Int(format / 8)
        return Array(UnsafeBufferPointer(start: data, count: Int(items) * itemSize))
    }
}

/// `--window NAME|ID` on an X display (issue 31).
public enum X11Windows {
    /// The window `query` names on `display` (`$DISPLAY` when nil); throws one sentence that lists
    /// the windows when none or several match.
    public static func find(_ query: String, display: String?) throws -> X11Window {
        guard let dpy = XOpenDisplay(display) else {
            throw CastError(.capture, "X11: cannot open display \(display ?? "$DISPLAY"); is an X server running and DISPLAY set?")
        }
        defer { XCloseDisplay(dpy) }
        return try choose(query, dpy, root: castd_x11_root_window(dpy, castd_x11_default_screen(dpy)))
    }

    /// An id that the listing lacks (a client window inside a window manager's frame, say) is
    /// taken as it is when such a window exists; otherwise `WindowChoice` decides.
    static func choose(_ query: String, _ dpy: OpaquePointer, root: Window) throws -> X11Window {
        let listed = X11Catalog.windows(dpy, root: root)
        if let id = WindowChoice.parseID(query), !listed.contains(where: { $0.id == id }) {
            lastXError.store(0, ordering: .relaxed)
            recordXErrors()
            if let w = X11Catalog.describe(dpy, Window(id), root: root), lastXError.load(ordering: .relaxed) == 0 { return w }
        }
        return try WindowChoice.resolve(query, among: listed)
    }
}
