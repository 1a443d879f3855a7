import CastCore
import CastMedia
import CastSystem
import Synchronization

/// What a `CapturePipeline`'s owner, its capture thread (`CaptureLoop`) and its encode
/// thread (`EncodeLoop`) share: the controls, as atomics one side writes and another
/// reads, and, under one lock, the owner's callbacks and the statistics. Nothing else is
/// shared between the threads.
final class PipelineState: @unchecked Sendable {
    let running = Atomic<Bool>(false)
    let keyframeWanted = Atomic<Bool>(false)
    /// The congestion controller's target in bit/s (0 until the first estimate), written by the
    /// peer's thread, read by the encode thread on every frame.
    let targetBitrate = Atomic<Int>(0)
    /// The frame rate the ladder chose (0: the caps'), written by the encode thread, read by capture.
    let wantedFrameRate = Atomic<Int>(0)
    /// Whether the encoder is refining a still picture (`StillRefinement.active`), written by
    /// the encode thread, read by capture: the screen is then read at the frame rate.
    let stillRefining = Atomic<Bool>(false)
    /// The negotiated codec and H.264 profile (`setCodec`, as `VideoFormat.code`); the encode
    /// thread follows it at its next frame.
    private let wantedFormat = Atomic<UInt8>(0)

    private let shared = Mutex<(callbacks: Callbacks, stats: CapturePipeline.Statistics)>((Callbacks(), CapturePipeline.Statistics()))

    /// The owner's handlers, set before or during a cast, called from the pipeline's threads.
    struct Callbacks {
        var sink: (@Sendable ([UInt8], Instant) -> Void)? = nil
        var needsUser: (@Sendable (String) -> Void)? = nil
        var backlog: (@Sendable () -> Duration)? = nil
        var failed: (@Sendable (String) -> Void)? = nil
        var sourceEnded: (@Sendable (String) -> Void)? = nil
        var sharingKnown: (@Sendable (String) -> Void)? = nil
    }

    var isRunning: Bool { running.load(ordering: .relaxed) }

    var format: VideoFormat {
        get { VideoFormat(code: wantedFormat.load(ordering: .relaxed)) }
        set { wantedFormat.store(newValue.code, ordering: .relaxed) }
    }

    func setCallbacks(_ change: (inout Callbacks) -> Void) { shared.withLock { change(&$0.callbacks) } }
    func callback<T>(_ path: KeyPath<Callbacks, T?>) -> T? { shared.withLock { $0.callbacks }[keyPath: path] }

    func withStats<R>(_ body: (inout CapturePipeline.Statistics) -> R) -> R { shared.withLock { body(&$0.stats) } }
    var statistics: CapturePipeline.Statistics { shared.withLock { $0.stats } }

    /// The encode thread gave up (issue 17): the session decides (reopen, or end the cast).
    func mediaFailed(_ reason: String) { callback(\.failed)?(reason) }

    /// Sleeps `d` in steps of 50 ms, returning early once the cast stops.
    func sleepWhileRunning(_ d: Duration, clock: some MonotonicClock) {
        let end = clock.now() + d
        while isRunning, clock.now() < end { SystemThread.sleep(.milliseconds(50)) }
    }
}

/// A boolean two threads share (one writes, one reads).
final class Flag: Sendable {
    private let atomic: Atomic<Bool>
    init(_ v: Bool) { atomic = Atomic(v) }
    var value: Bool { atomic.load(ordering: .relaxed) }
    func set(_ v: Bool) { atomic.store(v, ordering: .relaxed) }
}
