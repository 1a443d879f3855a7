import CastCapture
import CastCore
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
    /// The answer chose this video codec (spec §7): encode it from the next frame on.
    func setCodec(_ codec: VideoCodec)
    /// Who hears that capture cannot start without a person (the portal's dialog waits, nobody is there).
    func onNeedsUser(_ handler: @escaping @Sendable (String) -> Void)
    /// Who hears that the encoder or the capture failed for good in this run (issue 17).
    func onFailure(_ handler: @escaping @Sendable (String) -> Void)
    /// When the last frame was encoded: the progress the systemd watchdog waits for (issue 17).
    var lastFrameAt: Instant? { get }
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
        let choice = CaptureDoctor.select(requested: requested, environment: environment)
        log.write(LogLine(.info, "capture_backend", [("backend", choice.backend.rawValue), ("reason", choice.reason)]))
        switch choice.backend {
        case .x11: return .x11
        case .portal: return .portal
        case .mutter: return .mutter
        }
    }

    /// The portal's restore token lives next to the credentials (0700 directory, 0600 file).
    static func tokenStore(environment: [String: String]) -> RestoreTokenStore? {
        (try? CredentialStore.defaultDirectory(environment: environment)).map { RestoreTokenStore(directory: $0) }
    }

    static func make(_ o: SessionOptions, environment: [String: String], log: LogSink) -> any MediaPipeline {
        let portal = ScreenCastPortal.Options(busAddress: environment["DBUS_SESSION_BUS_ADDRESS"].flatMap { $0.isEmpty ? nil : $0 },
                                              tokenStore: tokenStore(environment: environment),
                                              responseTimeout: o.portalTimeout, cursor: o.cursor)
        let mutter = MutterScreenCast.Options(busAddress: environment["DBUS_SESSION_BUS_ADDRESS"].flatMap { $0.isEmpty ? nil : $0 },
                                              connector: o.output ?? "", cursorMode: o.cursor ? .metadata : .hidden)
        let fault = MediaFault(environment: environment)
        if let fault {
            log.write(LogLine(.warning, "test_fault_active", [("fault", fault.rawValue),
                                                             ("note", "\(MediaFault.environmentKey) is for tests only")]))
        }
        return CapturePipeline(options: o, log: log, backend: backend(o, environment: environment, log: log),
                               portal: portal, mutter: mutter, fault: fault)
    }
}
