import CX11

/// What the X server named by `$DISPLAY` offers the XShm source.
public struct X11Probe: Sendable {
    public var display: String
    public var width: Int
    public var height: Int
    public var depth: Int
    public var hasShm: Bool
    public var hasXFixes: Bool
    public var hasXDamage: Bool
    public var hasComposite: Bool = false
    /// What can be shared (issue 31): the connected RandR outputs and the top-level windows.
    public var outputs: [X11Output] = []
    public var windows: [X11Window] = []

    /// Opens the display, reads what it offers, closes it. Nil when no X server answers.
    public static func run(display name: String? = nil) -> X11Probe? {
        guard let dpy = XOpenDisplay(name) else { return nil }
        defer { XCloseDisplay(dpy) }
        let screen = castd_x11_default_screen(dpy)
        var eventBase: Int32 = 0, errorBase: Int32 = 0
        let fixes = XFixesQueryExtension(dpy, &eventBase, &errorBase) != 0
        let damage = XDamageQueryExtension(dpy, &eventBase, &errorBase) != 0
        let composite = XCompositeQueryExtension(dpy, &eventBase, &errorBase) != 0
        let root = castd_x11_root_window(dpy, screen)
        var probe = X11Probe(
            display: String(cString: XDisplayString(dpy)),
            width: Int(XDisplayWidth(dpy, screen)),
            height: Int(XDisplayHeight(dpy, screen)),
            depth: Int(castd_x11_default_depth(dpy, screen)),
            hasShm: XShmQueryExtension(dpy) != 0,
            hasXFixes: fixes,
            hasXDamage: damage)
        probe.hasComposite = composite
        probe.outputs = X11Catalog.outputs(dpy, root: root)
        probe.windows = X11Catalog.windows(dpy, root: root)
        return probe
    }
}
