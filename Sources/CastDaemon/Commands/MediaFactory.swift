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
        // SessionCommand refuses --capture portal before this (not wired yet).
        CapturePipeline(options: o, environment: environment, log: log)
    }
}
