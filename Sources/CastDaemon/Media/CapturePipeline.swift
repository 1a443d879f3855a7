import CastCapture
import CastCore
import CastEncode
import CastMedia
import CastSignaling
import CastSystem
import Dispatch

/// Screen → H.264 (or VP8) for a cast (issue 5 through issue 6), wired from its parts: a
/// capture thread (`CaptureLoop`) that reads the screen when it changes and writes frames
/// into the source's ring, and per capture source an encode thread (`EncodeLoop`) that
/// always takes the newest ready frame, encodes it and hands the access unit to the peer,
/// adapting its rate to the congestion controller's target (`RateAdaptation`). The ring
/// drops frames when the encoder is behind; nothing ever queues, so latency cannot grow
/// (docs/architecture.md: a frame is encoded now or dropped). The threads share only
/// `PipelineState`: the controls this class sets, the callbacks, and the `Statistics`.
/// Test-only faults (`MediaFault`) enter through `FaultInjection`.
public final class CapturePipeline: MediaPipeline, @unchecked Sendable {
    /// Where frames come from (`--capture`, resolved: auto is decided before).
    public enum Backend: String, Sendable { case x11, portal, mutter }

    private let options: SessionOptions
    private let backend: Backend
    private let log: LogSink
    private let state = PipelineState()
    private let capture: CaptureLoop
    private var finished: DispatchSemaphore? = nil                   // owner only

    public init(options: SessionOptions, log: LogSink, backend: Backend = .x11,
                portal: ScreenCastPortal.Options = ScreenCastPortal.Options(),
                mutter: MutterScreenCast.Options = MutterScreenCast.Options(), fault: MediaFault? = nil,
                refineStill: Bool = true) {
        self.options = options
        self.log = log
        self.backend = backend
        let clock = SystemMonotonicClock()
        let faults = FaultInjection(fault: fault, log: log)
        let encoder = EncodeLoop(preference: EncoderPreference(rawValue: options.encoder.rawValue) ?? .auto,
                                 log: log, clock: clock, state: state, faults: faults, refineStill: refineStill)
        capture = CaptureLoop(options: options, backend: backend, portalOptions: portal, mutterOptions: mutter,
                              log: log, clock: clock, state: state, faults: faults, encoder: encoder)
    }

    public func attach(sink: @escaping @Sendable ([UInt8], Instant) -> Void) { state.setCallbacks { $0.sink = sink } }
    public func requestKeyframe() { state.keyframeWanted.store(true, ordering: .relaxed) }
    /// The congestion controller's target for the media (issue 14); applied at the next frame.
    public func setTargetBitrate(_ bitsPerSecond: Int) { state.targetBitrate.store(max(0, bitsPerSecond), ordering: .relaxed) }
    /// How much media the sink (the peer's pacer) still holds, as time at its pacing rate.
    public func attach(backlog: @escaping @Sendable () -> Duration) { state.setCallbacks { $0.backlog = backlog } }
    public func setCodec(_ codec: VideoCodec, h264Profile: H264ProfileLevel?) {
        state.format = VideoFormat(codec: codec, h264Profile: h264Profile ?? .constrainedBaseline)
    }
    public func onNeedsUser(_ handler: @escaping @Sendable (String) -> Void) { state.setCallbacks { $0.needsUser = handler } }
    public func onFailure(_ handler: @escaping @Sendable (String) -> Void) { state.setCallbacks { $0.failed = handler } }
    public func onSourceEnded(_ handler: @escaping @Sendable (String) -> Void) { state.setCallbacks { $0.sourceEnded = handler } }
    /// What is shared became known (the portal's Start said which stream: "monitor 1280x720 at 0,0
    /// through the portal"), in `castd status`'s words.
    public func onSharingKnown(_ handler: @escaping @Sendable (String) -> Void) { state.setCallbacks { $0.sharingKnown = handler } }
    public var lastFrameAt: Instant? { state.withStats { $0.lastFrameAt } }

    public var statistics: Statistics { state.statistics }

    /// The capture backend this cast uses (`--capture` resolved).
    public var captureBackend: Backend { backend }

    /// The stage summaries of the window since the last call, as key=value log fields
    /// ("p50/p95/max" in ms); the window starts afresh.
    public func drainStageTimes() -> [(String, String)] { state.withStats { $0.drainStageTimes() } }

    /// The receiver's preferences (spec §5) applied under the cast's caps: never above
    /// 1080p30 (spec §12), nor above what the configuration lowered them to (`SessionOptions.caps`).
    static func caps(for prefs: CastSignaling.StreamPrefs, under base: CaptureCaps = .default) -> CaptureCaps {
        let resolution = CapturePreferences.Resolution(rawValue: prefs.resolution ?? "1080p") ?? .p1080
        return base.applying(CapturePreferences(resolution: resolution, frameRate: prefs.frameRate ?? 30))
    }

    public func start(_ prefs: CastSignaling.StreamPrefs) async {
        guard !state.running.exchange(true, ordering: .relaxed) else { return }
        let caps = Self.caps(for: prefs, under: options.caps)
        let done = DispatchSemaphore(value: 0)
        finished = done
        SystemThread.start(name: "castd-capture") { [capture] in
            capture.run(caps: caps)
            done.signal()
        }
    }

    public func stop() async {
        guard state.running.exchange(false, ordering: .relaxed), let done = finished else { return }
        finished = nil
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async { done.wait(); c.resume() }
        }
        let s = statistics
        log.write(LogLine(.info, "media_stopped", [("captured", s.captured), ("encoded", s.encoded),
                                                  ("ring_dropped", s.ringDropped), ("encoder", s.encoder)]))
    }
}
