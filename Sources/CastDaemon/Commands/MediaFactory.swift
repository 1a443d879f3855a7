import CastCore
import CastSignaling

/// The media side of a cast, as the session controller and the peer see it.
public protocol CastMedia: MediaPort {
    /// Where encoded access units go (the current peer).
    func attach(sink: @escaping @Sendable ([UInt8], Instant) -> Void)
    /// The receiver asked for a keyframe (PLI/FIR, already rate-limited).
    func requestKeyframe()
}

enum MediaFactory {
    static func make(_ o: SessionOptions, environment: [String: String], log: LogSink) -> any CastMedia {
        NoMedia(log: log)
    }
}

/// Placeholder until the capture pipeline is wired: sends nothing.
final class NoMedia: CastMedia, @unchecked Sendable {
    let log: LogSink
    init(log: LogSink) { self.log = log }
    func attach(sink: @escaping @Sendable ([UInt8], Instant) -> Void) {}
    func requestKeyframe() {}
    func start(_ prefs: StreamPrefs) async { log.write(LogLine(.warning, "media_unavailable")) }
    func stop() async {}
}
