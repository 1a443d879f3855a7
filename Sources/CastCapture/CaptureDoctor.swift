import CastMedia

/// Which capture backend `--capture auto` takes: the ScreenCast portal in a
/// Wayland session (XShm there sees only Xwayland windows), XShm otherwise.
public enum CaptureSelection {
    public static func autoPrefersPortal(environment: [String: String]) -> Bool {
        if let t = environment["XDG_SESSION_TYPE"], !t.isEmpty { return t == "wayland" }
        return !(environment["WAYLAND_DISPLAY"] ?? "").isEmpty
    }
}

/// The capture half of `castd doctor`: which backends work here, and why not.
public enum CaptureDoctor {
    /// Probes the X server named in `environment["DISPLAY"]` and the
    /// ScreenCast portal on the session bus (`DBUS_SESSION_BUS_ADDRESS`).
    /// Returns the backends in the order `--capture auto` would try them.
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
        // The order `--capture auto` tries them in, then the working ones first.
        let first = CaptureSelection.autoPrefersPortal(environment: environment) ? "portal" : "xshm"
        out.sort { a, b in
            if a.available != b.available { return a.available }
            return a.name == first && b.name != first
        }
        return (out, screen)
    }

    private static func isWayland(_ s: DoctorReport.DisplayServer) -> Bool {
        if case .wayland = s { return true }
        return false
    }
}
