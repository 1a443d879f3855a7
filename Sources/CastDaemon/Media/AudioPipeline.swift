import CastCapture
import CastCore
import CastEncode
import CastRTP
import CastSystem
import Dispatch
import FoundationEssentials
import Synchronization

/// Desktop audio for a cast (issue 18): one thread for the run. At `start` it
/// opens the capture stream once and closes it again (the probe: the daemon must
/// know before its first offer whether there is audio to offer). After that it
/// captures only while a peer uses the audio (`setWanted(true)`: the current
/// answer accepted the Opus m-line), and closes the capture stream when that ends,
/// so nothing is captured while castd waits for approval or for a viewer, nor
/// between negotiations. While wanted it reads 20 ms frames from
/// `PipeWireAudioSource` (its `AudioRing` drops the oldest samples when this
/// thread lags), encodes them with Opus (a fresh encoder per capture) and hands
/// each frame to `sink` (the current peer's bounded mailbox,
/// `PeerRunner.send(audioFrame:)`). Nothing here waits on video, and video never
/// waits on it: they share no lock and no queue.
///
/// The encoder's expected loss follows `expectedLoss` (the peer's
/// `OpusLossPlan`), read once per frame.
final class AudioPipeline: @unchecked Sendable {
    struct Statistics: Sendable, Equatable {
        var framesEncoded = 0
        var encodeErrors = 0
        /// Reads that found no whole frame within 100 ms (nothing plays, the sink is suspended).
        var captureTimeouts = 0
        var ringDropped: Int64 = 0
        var silenceInserted: Int64 = 0
        var expectedLossPercent = 0
        /// RFC 6464 level of the last frame, in −dBov (127: silence).
        var lastLevel: UInt8 = 127
        var sink: String? = nil
        /// Why capture is not running (nil while it runs or before start).
        var unavailable: String? = nil
        /// The encoder's payload bytes, for the bitrate figure.
        var bytesEncoded = 0
        /// Whether the capture stream is open now, and how many times it was opened for a peer.
        var capturing = false
        var captureStarts = 0
    }

    private let log: LogSink
    private let clock: any MonotonicClock
    private let sink: @Sendable (EncodedAudioFrame) -> Void
    private let expectedLoss: @Sendable () -> Int
    private let sourceOptions: PipeWireAudioSource.Options
    private let encoderSettings: OpusAudioEncoder.Settings
    private let running = Atomic<Bool>(false)
    private let state = Mutex<(stats: Statistics, source: PipeWireAudioSource?, done: DispatchSemaphore?)>((Statistics(), nil, nil))
    /// Signalled once the thread has probed the capture stream (opened and closed it), or failed to.
    private let opened = DispatchSemaphore(value: 0)
    /// A peer uses the audio now: capture.
    private let wanted = Atomic<Bool>(false)
    /// Wakes the idle thread (wanted, or stopping).
    private let wake = DispatchSemaphore(value: 0)

    init(log: LogSink, clock: any MonotonicClock, sourceOptions: PipeWireAudioSource.Options = .init(),
         encoderSettings: OpusAudioEncoder.Settings = .init(),
         sink: @escaping @Sendable (EncodedAudioFrame) -> Void, expectedLoss: @escaping @Sendable () -> Int) {
        self.log = log
        self.clock = clock
        self.sourceOptions = sourceOptions
        self.encoderSettings = encoderSettings
        self.sink = sink
        self.expectedLoss = expectedLoss
    }

    var statistics: Statistics { state.withLock { $0.stats } }

    /// Waits until the probe found audio to capture (nil) or none (the reason); nil also
    /// when `timeout` passed first (capture may still work: frames then simply begin later).
    func waitUntilOpened(timeout: Duration) -> String? {
        guard opened.wait(timeout: .now() + .nanoseconds(Int(timeout.totalNanoseconds))) == .success else { return nil }
        opened.signal()   // later callers see the same outcome
        return statistics.unavailable
    }

    func start() {
        guard !running.exchange(true, ordering: .relaxed) else { return }
        let done = DispatchSemaphore(value: 0)
        state.withLock { $0.done = done }
        SystemThread.start(name: "castd-audio") { [self] in
            run()
            done.signal()
        }
    }

    /// Captures while `on` (any thread): true once an answer accepted the audio, false
    /// when that peer is gone. The capture stream opens and closes with it.
    func setWanted(_ on: Bool) {
        guard wanted.exchange(on, ordering: .relaxed) != on else { return }
        if on {
            wake.signal()
        } else {
            state.withLock { $0.source }?.interrupt()
        }
    }

    func stop() async {
        guard running.exchange(false, ordering: .relaxed) else { return }
        wake.signal()
        let (source, done) = state.withLock { s in (s.source, s.done) }
        source?.interrupt()
        guard let done else { return }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async { done.wait(); c.resume() }
        }
        state.withLock { $0.done = nil }
    }

    private func run() {
        // The probe: is there a sink to capture, and does libopus start?
        do {
            try openSource().close()
            _ = try OpusAudioEncoder(settings: encoderSettings)
        } catch {
            let message = (error as? CastError)?.message ?? "\(error)"
            state.withLock { $0.stats.unavailable = message }
            log.write(LogLine(.notice, "audio_unavailable", [("reason", message), ("effect", "video only")]))
            opened.signal()
            return
        }
        log.write(LogLine(.info, "audio_available", [("sink", statistics.sink ?? "default"),
                                                     ("note", "captured only while a peer takes audio")]))
        opened.signal()
        while running.load(ordering: .relaxed) {
            guard wanted.load(ordering: .relaxed) else {
                wake.wait()
                continue
            }
            guard capture() else { return }
        }
    }

    private func openSource() throws -> PipeWireAudioSource {
        let log = self.log
        let source = try PipeWireAudioSource(options: sourceOptions, clock: clock) { sink in
            log.write(LogLine(.notice, "audio_sink", [("sink", sink)]))
        }
        state.withLock { $0.stats.sink = source.currentSink }
        return source
    }

    /// One capture for one peer: opens the stream, encodes until no longer wanted (or
    /// stopping), closes it. False when capture failed (the run then ends: video only).
    private func capture() -> Bool {
        let source: PipeWireAudioSource
        let encoder: OpusAudioEncoder
        do {
            source = try openSource()
            encoder = try OpusAudioEncoder(settings: encoderSettings)
        } catch {
            let message = (error as? CastError)?.message ?? "\(error)"
            log.write(LogLine(.warning, "audio_capture_failed", [("reason", message), ("effect", "video only")]))
            state.withLock { $0.stats.unavailable = message }
            return false
        }
        state.withLock { s in
            s.source = source
            s.stats.unavailable = nil
            s.stats.capturing = true
            s.stats.captureStarts += 1
        }
        log.write(LogLine(.info, "audio_started", [("sink", source.currentSink ?? "default"), ("codec", "opus"),
                                                   ("kbps", encoder.settings.bitsPerSecond / 1000),
                                                   ("frame_ms", encoder.settings.frameDuration.totalNanoseconds / 1_000_000),
                                                   ("fec", encoder.settings.inbandFEC)]))
        var framesThisCapture = 0
        // The ring's counters start at 0 with each source; the statistics add up over the run.
        let (droppedBefore, silenceBefore) = state.withLock { ($0.stats.ringDropped, $0.stats.silenceInserted) }
        defer {
            state.withLock { s in
                s.source = nil
                s.stats.capturing = false
            }
            source.close()   // here, on this thread: never by a release on PipeWire's (PipeWireAudioSource.borrow)
            log.write(LogLine(.info, "audio_stopped", [("frames", framesThisCapture)]))
        }
        var planned = encoder.settings.expectedPacketLossPercent
        let n = encoder.settings.samplesPerChannel
        // setWanted(false) and stop() interrupt a waiting read; the flags are read again after each
        // frame, so one that came before `source` was published still ends this within 100 ms.
        while running.load(ordering: .relaxed) && wanted.load(ordering: .relaxed) {
            switch source.read(samplesPerChannel: n, wait: .milliseconds(100)) {
            case .chunk(let chunk):
                let want = expectedLoss()
                if want != planned, (try? encoder.setExpectedPacketLoss(percent: want)) != nil {
                    planned = want
                    log.write(LogLine(.info, "audio_expected_loss", [("percent", want)]))
                }
                let level = chunk.samples.withUnsafeBufferPointer { RTPExtensionValue.minusDBov(of: $0) }
                do {
                    let opus = try encoder.encode(chunk.samples)
                    sink(EncodedAudioFrame(opus: opus, samples: n, captureTime: chunk.captureTime,
                                           skippedBefore: chunk.skippedBefore, level: level))
                    framesThisCapture += 1
                    state.withLock { s in
                        s.stats.framesEncoded += 1
                        s.stats.bytesEncoded += opus.count
                        s.stats.lastLevel = level
                        s.stats.expectedLossPercent = planned
                        s.stats.ringDropped = droppedBefore + source.droppedSamples
                        s.stats.silenceInserted = silenceBefore + source.silenceInserted
                        s.stats.sink = source.currentSink
                    }
                } catch {
                    state.withLock { $0.stats.encodeErrors += 1 }
                }
            case .timeout:
                state.withLock { $0.stats.captureTimeouts += 1 }
            case .interrupted:
                return true
            case .error(let e):
                log.write(LogLine(.warning, "audio_capture_failed", [("reason", e.message), ("effect", "video only until media restarts")]))
                state.withLock { $0.stats.unavailable = e.message }
                return false
            }
        }
        return true
    }
}
