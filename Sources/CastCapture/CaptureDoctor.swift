import CastMedia

/// The capture half of `castd doctor`: which backends work here, and why not.
public enum CaptureDoctor {
    /// Probes the X server named in `environment["DISPLAY"]` and the session
    /// bus. Returns the backends in the order castd would try them.
    public static func backends(environment: [String: String]) -> (components: [DoctorReport.Component], screen: FrameSize?) {
        var out: [DoctorReport.Component] = []
        var screen: FrameSize? = nil
        let server = DoctorReport.displayServer(environment: environment)

        // PipeWire via the ScreenCast portal: the only way on Wayland.
        let bus = SessionBusProbe.available()
        out.append(DoctorReport.Component(
            name: "pipewire", available: false,
            detail: "the xdg-desktop-portal ScreenCast source is not implemented in this build"
                + (bus ? " (a session bus is present)" : "; there is also no D-Bus session bus")))

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
        // Prefer XShm when it works (PipeWire is not built yet).
        out.sort { $0.available && !$1.available }
        return (out, screen)
    }

    private static func isWayland(_ s: DoctorReport.DisplayServer) -> Bool {
        if case .wayland = s { return true }
        return false
    }
}
