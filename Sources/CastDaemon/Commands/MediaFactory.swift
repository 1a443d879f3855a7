import CastCapture
import CastCore
import CastIO
import CastSignaling

/// The media side of a cast, as the session controller and the peer see it.
public protocol MediaPipeline: MediaPort {
    /// Where encoded access units go (the current peer).
    func attach(sink: @escaping @Sendable ([UInt8], Instant) -> Void)
    /// The receiver asked for a keyframe (PLI/FIR, already rate-limited).
    func requestKeyframe()
    /// The congestion controller's target for the media, in bit/s (issue 14).
    func setTargetBitrate(_ bitsPerSecond: Int)
    /// How much earlier media the sink still holds (the peer's pacer queue, as time).
    func attach(backlog: @escaping @Sendable () -> Duration)
    /// The answer chose this video codec (spec §7), for H.264 in this profile: encode it from the next frame on.
    func setCodec(_ codec: VideoCodec, h264Profile: H264ProfileLevel?)
    /// Who hears that capture cannot start without a person (the portal's dialog waits, nobody is there).
    func onNeedsUser(_ handler: @escaping @Sendable (String) -> Void)
    /// Who hears that the encoder or the capture failed for good in this run (issue 17).
    func onFailure(_ handler: @escaping @Sendable (String) -> Void)
    /// Who hears that what was shared is gone for good (the shared window closed, issue 31).
    func onSourceEnded(_ handler: @escaping @Sendable (String) -> Void)
    /// When the last frame was encoded: the progress the systemd watchdog waits for (issue 17).
    var lastFrameAt: Instant? { get }
}

extension MediaPipeline {
    /// A pipeline whose source never ends on its own (a whole screen) needs no handler.
    public func onSourceEnded(_ handler: @escaping @Sendable (String) -> Void) {}
}

enum MediaFactory {
    /// `--capture` resolved (auto: Mutter in a Wayland session where it answers, else the
    /// portal there, else XShm; see `CaptureSelection`), logged with the reason.
    static func backend(_ o: SessionOptions, environment: [String: String], log: LogSink) -> CapturePipeline.Backend {
        let requested: CaptureBackendKind? = switch o.capture {
        case .auto: nil
        case .x11: .x11
        case .portal: .portal
        case .mutter: .mutter
        }
        var choice = CaptureDoctor.select(requested: requested, environment: environment)
        if o.source == .window, requested == nil, choice.backend == .mutter {
            // castd asks Mutter for monitors only; a window is picked through the portal's dialog.
            choice.backend = .portal
            choice.reason += "; --source window goes through the ScreenCast portal's dialog"
        }
        log.write(LogLine(.info, "capture_backend", [("backend", choice.backend.rawValue), ("reason", choice.reason)]))
        switch choice.backend {
        case .x11: return .x11
        case .portal: return .portal
        case .mutter: return .mutter
        }
    }

    /// The portal's restore token lives next to the credentials (0700 directory, 0600 file).
    static func tokenStore(environment: [String: String], source: SessionOptions.Source = .monitor) -> RestoreTokenStore? {
        (try? CredentialStore.defaultDirectory(environment: environment))
            .map { RestoreTokenStore(directory: $0, sourceType: portalSourceType(source)) }
    }

    static func portalSourceType(_ source: SessionOptions.Source) -> PortalSourceType {
        source == .window ? .window : .monitor
    }

    /// Bad input found before the cast starts (issue 31), as one sentence: `--source window` where
    /// it cannot work, a `--window` or an X11 `--output` that this display does not have (the
    /// sentence lists what it has). Nil when the cast can start.
    static func preflight(_ o: SessionOptions, backend: CapturePipeline.Backend, environment: [String: String]) -> String? {
        switch (backend, o.source) {
        case (.mutter, .window):
            return "--source window is not available with --capture mutter (castd asks Mutter for monitors); use --capture portal to pick a window in the desktop's dialog"
        case (.x11, .window):
            guard let query = o.window else {
                return "--source window on X11 needs --window NAME|ID (a title or an id; castd doctor lists the windows)"
            }
            do { _ = try X11Windows.find(query, display: o.display ?? environment["DISPLAY"]) }
            catch let e as CastError { return e.message }
            catch { return "\(error)" }
            return nil
        case (.x11, .monitor):
            guard let name = o.output, let probe = X11Probe.run(display: o.display ?? environment["DISPLAY"]) else { return nil }
            let names = probe.outputs.map(\.name)
            if names.contains(name) { return nil }
            return "X11 has no output named '\(name)'; " + (names.isEmpty ? "this display has no RandR outputs"
                : "its outputs are: " + probe.outputs.map(\.summary).joined(separator: ", "))
        case (.portal, _), (.mutter, .monitor):
            if o.window != nil { return "--window NAME|ID picks an X11 window; through the portal the window is picked in its dialog (use --source window alone)" }
            return nil
        }
    }

    static func make(_ o: SessionOptions, backend: CapturePipeline.Backend, environment: [String: String], log: LogSink) -> any MediaPipeline {
        let portal = ScreenCastPortal.Options(busAddress: environment["DBUS_SESSION_BUS_ADDRESS"].flatMap { $0.isEmpty ? nil : $0 },
                                              tokenStore: tokenStore(environment: environment, source: o.source),
                                              responseTimeout: o.portalTimeout, cursor: o.cursor,
                                              sourceType: portalSourceType(o.source))
        let mutter = MutterScreenCast.Options(busAddress: environment["DBUS_SESSION_BUS_ADDRESS"].flatMap { $0.isEmpty ? nil : $0 },
                                              connector: o.output ?? "", cursorMode: o.cursor ? .metadata : .hidden)
        let fault = MediaFault(environment: environment)
        if let fault {
            log.write(LogLine(.warning, "test_fault_active", [("fault", fault.rawValue),
                                                             ("note", "\(MediaFault.environmentKey) is for tests only")]))
        }
        // The X display resolved once, as the preflight resolved it: X11 opens the same one either
        // way, and what the pipeline reports names it (`castd status`, the capture log).
        var resolved = o
        resolved.display = o.display ?? environment["DISPLAY"].flatMap { $0.isEmpty ? nil : $0 }
        let refineStill = TestHooks.stillRefinement(environment)
        if !refineStill {
            log.write(LogLine(.warning, "test_hook_active", [("hook", "\(TestHooks.stillRefinementVariable)=off"),
                                                            ("note", "for tests only")]))
        }
        return CapturePipeline(options: resolved, log: log, backend: backend,
                               portal: portal, mutter: mutter, fault: fault, refineStill: refineStill)
    }
}
