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
    static func make(_ o: SessionOptions, environment: [String: String], log: LogSink) -> any MediaPipeline {
        switch o.capture {
        case .auto, .x11:
            return CapturePipeline(options: o, log: log)
        case .portal, .mutter:
            log.write(LogLine(.error, "capture_unavailable",
                              [("backend", o.capture.rawValue), ("note", "Wayland capture is not built yet; use --capture x11")]))
            return NoMedia(log: log)
        }
    }
}

/// A cast without media (the capture backend asked for is not available): signaling and the peer still run.
final class NoMedia: MediaPipeline, @unchecked Sendable {
    let log: LogSink
    init(log: LogSink) { self.log = log }
    func attach(sink: @escaping @Sendable ([UInt8], Instant) -> Void) {}
    func requestKeyframe() {}
    func start(_ prefs: StreamPrefs) async { log.write(LogLine(.warning, "media_unavailable")) }
    func stop() async {}
}
