import CastMedia

/// The capture half of `castd doctor`: which backends work here, and why not.
public enum CaptureDoctor {
    /// What castd does with DMA-BUF frames from PipeWire (the portal's and Mutter's streams).
    public static let dmabuf = "linear, CPU-mapped; tiled modifiers need a GPU importer: not built"

    /// Probes the X server named in `environment["DISPLAY"]`, and the
    /// ScreenCast portal and Mutter's ScreenCast on the session bus
    /// (`DBUS_SESSION_BUS_ADDRESS`). Returns the backends with the one
    /// `--capture auto` picks first when it is available, then the working ones.
    public static func backends(environment: [String: String], tokenStore: RestoreTokenStore? = nil)
        -> (components: [DoctorReport.Component], screen: FrameSize?) {
        var out: [DoctorReport.Component] = []
        var screen: FrameSize? = nil
        let server = DoctorReport.displayServer(environment: environment)

        // PipeWire via the ScreenCast portal: the only way on Wayland.
        let address = environment["DBUS_SESSION_BUS_ADDRESS"].flatMap { $0.isEmpty ? nil : $0 }
        let probe = ScreenCastPortal.probe(busAddress: address)
        var detail = probe.detail
        if probe.available, let tokenStore {
            let saved = (try? tokenStore.load()) != nil
            detail += saved ? "; a restore token is saved, so the next start needs no dialog"
                            : "; no restore token is saved yet, so the first start asks in a dialog"
        }
        out.append(DoctorReport.Component(name: "portal", available: probe.available, detail: detail))

        if let display = environment["DISPLAY"], !display.isEmpty {
            if let p = X11Probe.run(display: display) {
                let usable = p.hasShm && p.hasXFixes && p.hasXDamage && p.depth >= 24
                var missing: [String] = []
                if !p.hasShm { missing.append("MIT-SHM") }
                if !p.hasXFixes { missing.append("XFIXES") }
                if !p.hasXDamage { missing.append("DAMAGE") }
                if p.depth < 24 { missing.append("a 24-bit visual (depth is \(p.depth))") }
                let detail = usable
                    ? "XShm on \(p.display), \(p.width)x\(p.height) depth \(p.depth), cursor from XFixes, changes from XDamage"
                        + (isWayland(server) ? " (Xwayland: only X11 windows are visible)" : "")
                    : "the X server on \(p.display) lacks " + missing.joined(separator: ", ")
                if usable { screen = FrameSize(width: p.width, height: p.height) }
                out.append(DoctorReport.Component(name: "xshm", available: usable, detail: detail))
            } else {
                out.append(DoctorReport.Component(name: "xshm", available: false,
                                                  detail: "no X server answers on DISPLAY=\(display)"))
            }
        } else {
            out.append(DoctorReport.Component(name: "xshm", available: false, detail: "DISPLAY is not set"))
        }
        // Mutter's own ScreenCast: Wayland capture with no dialog on GNOME.
        out.append(MutterScreenCast.probe(busAddress: address))

        // What `--capture auto` picks goes first (DoctorReport's "will use" is the first available one).
        let choice = CaptureSelection.choose(requested: nil, environment: environment, available: availability(of: out))
        let chosen = componentName(choice.backend)
        out = out.map { c in
            var c = c
            if c.name == chosen, c.available { c.detail += "; --capture auto picks it: \(choice.reason)" }
            return c
        }
        out.sort { a, b in
            if a.available != b.available { return a.available }
            return a.name == chosen && b.name != chosen
        }
        if choice.backend != .x11 { screen = nil }
        return (out, screen)
    }

    /// What `--capture` (nil: auto) resolves to here, probing the X server and the session bus.
    public static func select(requested: CaptureBackendKind?, environment: [String: String]) -> CaptureSelection.Choice {
        let none = CaptureSelection.Availability(x11: false, portal: false, mutter: false)
        let available = requested == nil ? availability(of: backends(environment: environment).components) : none
        return CaptureSelection.choose(requested: requested, environment: environment, available: available)
    }

    /// The doctor's component name of each backend.
    static func componentName(_ kind: CaptureBackendKind) -> String {
        switch kind {
        case .x11: return "xshm"
        case .portal: return "portal"
        case .mutter: return "mutter"
        }
    }

    private static func availability(of list: [DoctorReport.Component]) -> CaptureSelection.Availability {
        func up(_ k: CaptureBackendKind) -> Bool { list.contains { $0.name == componentName(k) && $0.available } }
        return .init(x11: up(.x11), portal: up(.portal), mutter: up(.mutter))
    }

    private static func isWayland(_ s: DoctorReport.DisplayServer) -> Bool {
        if case .wayland = s { return true }
        return false
    }
}

/// What can be shared here (issue 31), as `castd doctor` lists it: the X server's outputs and
/// top-level windows; `--output` and `--window` take the names and ids shown.
public struct ShareableListing: Equatable, Sendable {
    public var outputs: [X11Output]
    public var windows: [X11Window]
    /// Why nothing is listed (no X server), or nil.
    public var note: String?

    public init(outputs: [X11Output], windows: [X11Window], note: String? = nil) {
        self.outputs = outputs
        self.windows = windows
        self.note = note
    }

    /// Probes `environment["DISPLAY"]`. Through the portal the person picks in its dialog, so
    /// on Wayland only Xwayland's own windows could be listed: the note says so.
    public static func probe(environment: [String: String]) -> ShareableListing {
        guard let display = environment["DISPLAY"], !display.isEmpty else {
            return ShareableListing(outputs: [], windows: [], note: "no X server (DISPLAY is not set): through the portal, the monitor or window is picked in its dialog")
        }
        guard let p = X11Probe.run(display: display) else {
            return ShareableListing(outputs: [], windows: [], note: "no X server answers on DISPLAY=\(display)")
        }
        var note: String? = nil
        if !p.hasComposite { note = "the X server has no Composite extension: windows cannot be shared one by one" }
        if CaptureSelection.isWayland(environment) {
            note = "a Wayland session: these are Xwayland's; with --capture portal the monitor or window is picked in the portal's dialog"
        }
        return ShareableListing(outputs: p.outputs, windows: p.windows, note: note)
    }

    /// One line per output and window, with the option that shares it.
    public var lines: [String] {
        var out = outputs.map { "share monitor: \($0.summary) (--output \($0.name))" }
        out += windows.map { "share window: \($0.summary)\($0.mapped ? "" : " (not mapped)") (--window \($0.hexID))" }
        if outputs.isEmpty && windows.isEmpty { out.append("share: nothing listed" + (note.map { " (\($0))" } ?? "")) }
        else if let note { out.append("share: \(note)") }
        return out
    }
}
