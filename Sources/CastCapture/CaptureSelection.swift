/// The capture backends castd can run.
public enum CaptureBackendKind: String, Sendable, Equatable, CaseIterable {
    /// XShm on an X server (or Xwayland, which shows only X11 windows).
    case x11
    /// The xdg-desktop-portal ScreenCast interface (may ask a person once).
    case portal
    /// GNOME's org.gnome.Mutter.ScreenCast (never asks).
    case mutter
}

/// Which backend `--capture` means, and a sentence why (for the log and `castd doctor`).
public enum CaptureSelection {
    public struct Choice: Equatable, Sendable {
        public var backend: CaptureBackendKind
        public var reason: String
    }

    /// What answered on this machine (the probes' results).
    public struct Availability: Equatable, Sendable {
        public var x11: Bool
        public var portal: Bool
        public var mutter: Bool
        public init(x11: Bool, portal: Bool, mutter: Bool) {
            self.x11 = x11
            self.portal = portal
            self.mutter = mutter
        }
    }

    /// A Wayland session: `XDG_SESSION_TYPE` says so when it is set, else `WAYLAND_DISPLAY` is set.
    public static func isWayland(_ environment: [String: String]) -> Bool {
        if let t = environment["XDG_SESSION_TYPE"], !t.isEmpty { return t == "wayland" }
        return !(environment["WAYLAND_DISPLAY"] ?? "").isEmpty
    }

    /// `requested` nil is `auto`: on Wayland, Mutter when it answers (no dialog
    /// for an unattended host), else the portal, else XShm through Xwayland;
    /// elsewhere XShm when an X server answers, else Mutter, else the portal
    /// (a daemon started without the desktop's DISPLAY or WAYLAND_DISPLAY).
    public static func choose(requested: CaptureBackendKind?, environment: [String: String],
                              available a: Availability) -> Choice {
        if let requested { return Choice(backend: requested, reason: "asked for with --capture \(requested.rawValue)") }
        if isWayland(environment) {
            if a.mutter { return Choice(backend: .mutter, reason: "a Wayland session where org.gnome.Mutter.ScreenCast answers (no consent dialog)") }
            if a.portal { return Choice(backend: .portal, reason: "a Wayland session without Mutter's ScreenCast: the ScreenCast portal") }
            if a.x11 { return Choice(backend: .x11, reason: "a Wayland session where neither Mutter nor a ScreenCast portal answers: XShm through Xwayland (X11 windows only)") }
            return Choice(backend: .portal, reason: "a Wayland session where nothing answers yet: the ScreenCast portal is the Wayland path")
        }
        if a.x11 { return Choice(backend: .x11, reason: "an X server answers on DISPLAY") }
        if a.mutter { return Choice(backend: .mutter, reason: "no X server, but org.gnome.Mutter.ScreenCast answers on the session bus") }
        if a.portal { return Choice(backend: .portal, reason: "no X server, but a ScreenCast portal answers on the session bus") }
        return Choice(backend: .x11, reason: "nothing answers; XShm is the default outside Wayland")
    }
}
