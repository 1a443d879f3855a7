/// What `castd doctor` reports: data only (the probes fill it, the CLI prints it).
public struct DoctorReport: Equatable, Sendable {
    /// One capture backend or encoder: available or not, and a sentence why.
    public struct Component: Equatable, Sendable {
        public var name: String
        public var available: Bool
        /// Why it is (or is not) usable: a sentence, e.g. "XShm on :0, 1920x1080 depth 24".
        public var detail: String

        public init(name: String, available: Bool, detail: String) {
            self.name = name
            self.available = available
            self.detail = detail
        }
    }

    public enum DisplayServer: Equatable, Sendable {
        case x11(display: String)
        case wayland(display: String)
        case none
    }

    public var displayServer: DisplayServer
    public var captureBackends: [Component]
    public var encoders: [Component]
    public var caps: CaptureCaps
    /// The screen size the chosen backend sees, when one is available.
    public var screenSize: FrameSize?

    public init(displayServer: DisplayServer, captureBackends: [Component], encoders: [Component],
                caps: CaptureCaps, screenSize: FrameSize?) {
        self.displayServer = displayServer
        self.captureBackends = captureBackends
        self.encoders = encoders
        self.caps = caps
        self.screenSize = screenSize
    }

    /// The display server from the environment (`WAYLAND_DISPLAY` wins, as a
    /// Wayland session with Xwayland sets both).
    public static func displayServer(environment: [String: String]) -> DisplayServer {
        if let w = environment["WAYLAND_DISPLAY"], !w.isEmpty { return .wayland(display: w) }
        if let x = environment["DISPLAY"], !x.isEmpty { return .x11(display: x) }
        return .none
    }

    public var captureBackend: Component? { captureBackends.first { $0.available } }
    public var encoder: Component? { encoders.first { $0.available } }

    /// Human-readable lines, one fact per line.
    public var lines: [String] {
        var out: [String] = []
        switch displayServer {
        case .x11(let d): out.append("display server: X11 (\(d))")
        case .wayland(let d): out.append("display server: Wayland (\(d))")
        case .none: out.append("display server: none (neither WAYLAND_DISPLAY nor DISPLAY is set)")
        }
        for c in captureBackends {
            out.append("capture \(c.name): \(c.available ? "available" : "unavailable") — \(c.detail)")
        }
        for e in encoders {
            out.append("encoder \(e.name): \(e.available ? "available" : "unavailable") — \(e.detail)")
        }
        if let s = screenSize {
            out.append("screen: \(s), encoded as \(caps.targetSize(for: s)) at up to \(caps.maxFrameRate) fps, \(caps.bitrate(for: caps.targetSize(for: s)) / 1000) kbps")
        }
        out.append("caps: at most \(caps.maxWidth)x\(caps.maxHeight) at \(caps.maxFrameRate) fps, \(caps.maxBitrate / 1000) kbps")
        out.append("will use: capture \(captureBackend?.name ?? "none"), encoder \(encoder?.name ?? "none")")
        return out
    }
}
