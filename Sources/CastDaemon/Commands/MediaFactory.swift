import CastCapture
import CastCore
import CastSignaling

/// The media side of a cast, as the session controller and the peer see it.
public protocol MediaPipeline: MediaPort {
    /// Where encoded access units go (the current peer).
    func attach(sink: @escaping @Sendable ([UInt8], Instant) -> Void)
    /// The receiver asked for a keyframe (PLI/FIR, already rate-limited).
    func requestKeyframe()
}

enum MediaFactory {
    /// `--capture` resolved: auto takes the ScreenCast portal in a Wayland session, XShm otherwise.
    static func backend(_ o: SessionOptions, environment: [String: String]) -> CapturePipeline.Backend {
        switch o.capture {
        case .x11: return .x11
        case .portal: return .portal
        case .auto, .mutter:   // SessionCommand refuses mutter before this (not built yet)
            return CaptureSelection.autoPrefersPortal(environment: environment) ? .portal : .x11
        }
    }

    /// The portal's restore token lives next to the credentials (0700 directory, 0600 file).
    static func tokenStore(environment: [String: String]) -> RestoreTokenStore? {
        (try? CredentialStore.defaultDirectory(environment: environment)).map { RestoreTokenStore(directory: $0) }
    }

    static func make(_ o: SessionOptions, environment: [String: String], log: LogSink) -> any MediaPipeline {
        let portal = ScreenCastPortal.Options(busAddress: environment["DBUS_SESSION_BUS_ADDRESS"].flatMap { $0.isEmpty ? nil : $0 },
                                              tokenStore: tokenStore(environment: environment), cursor: o.cursor)
        return CapturePipeline(options: o, log: log, backend: backend(o, environment: environment), portal: portal)
    }
}
