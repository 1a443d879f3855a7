import CastCapture
import CastCore
import CastEncode
import CastRTP
import Foundation
import Synchronization

/// Desktop audio for a cast (issue 18): one thread, started once for the run
/// (the daemon needs to know before its first offer whether there is audio to
/// send, and opening and closing the capture stream once per media start would
/// only repeat that), that reads 20 ms frames from `PipeWireAudioSource`
/// (its `AudioRing` drops the oldest samples when this thread lags), encodes
/// them with Opus and hands each frame to `sink` (the current peer's bounded
/// mailbox, `PeerRunner.send(audioFrame:)`). Nothing here waits on video, and
/// video never waits on it: they share no lock and no queue.
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
    }

    private let log: LogSink
    private let clock: any MonotonicClock
    private let sink: @Sendable (EncodedAudioFrame) -> Void
    private let expectedLoss: @Sendable () -> Int
    private let sourceOptions: PipeWireAudioSource.Options
    private let running = Atomic<Bool>(false)
    private let state = Mutex<(stats: Statistics, source: PipeWireAudioSource?, done: DispatchSemaphore?)>((Statistics(), nil, nil))
    /// Signalled once the thread has opened the capture stream, or failed to.
    private let opened = DispatchSemaphore(value: 0)

    init(log: LogSink, clock: any MonotonicClock, sourceOptions: PipeWireAudioSource.Options = .init(),
         sink: @escaping @Sendable (EncodedAudioFrame) -> Void, expectedLoss: @escaping @Sendable () -> Int) {
        self.log = log
        self.clock = clock
        self.sourceOptions = sourceOptions
        self.sink = sink
        self.expectedLoss = expectedLoss
    }

    var statistics: Statistics { state.withLock { $0.stats } }

    /// Waits until capture runs (nil) or could not start (the reason); nil also when
    /// `timeout` passed first (it may still start: frames then simply begin later).
    func waitUntilOpened(timeout: Duration) -> String? {
        guard opened.wait(timeout: .now() + .nanoseconds(Int(timeout.totalNanoseconds))) == .success else { return nil }
        opened.signal()   // later callers see the same outcome
        return statistics.unavailable
    }

    func start() {
        guard !running.exchange(true, ordering: .relaxed) else { return }
        let done = DispatchSemaphore(value: 0)
        state.withLock { $0.done = done }
        let t = Thread { [self] in
            run()
            done.signal()
        }
        t.name = "castd-audio"
        t.start()
    }

    func stop() async {
        guard running.exchange(false, ordering: .relaxed) else { return }
        let (source, done) = state.withLock { s in (s.source, s.done) }
        source?.interrupt()
        guard let done else { return }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async { done.wait(); c.resume() }
        }
        state.withLock { $0.done = nil }
    }

    private func run() {
        let log = self.log
        let source: PipeWireAudioSource
        let encoder: OpusAudioEncoder
        do {
            source = try PipeWireAudioSource(options: sourceOptions, clock: clock) { sink in
                log.write(LogLine(.notice, "audio_sink", [("sink", sink)]))
            }
            encoder = try OpusAudioEncoder()
        } catch {
            let message = (error as? CastError)?.message ?? "\(error)"
            state.withLock { $0.stats.unavailable = message }
            log.write(LogLine(.notice, "audio_unavailable", [("reason", message), ("effect", "video only")]))
            opened.signal()
            return
        }
        state.withLock { s in
            s.source = source
            s.stats.sink = source.currentSink
            s.stats.unavailable = nil
        }
        opened.signal()
        log.write(LogLine(.info, "audio_started", [("sink", source.currentSink ?? "default"), ("codec", "opus"),
                                                   ("kbps", encoder.settings.bitsPerSecond / 1000),
                                                   ("frame_ms", encoder.settings.frameDuration.totalNanoseconds / 1_000_000)]))
        defer {
            state.withLock { $0.source = nil }
            source.close()   // here, on this thread: never by a release on PipeWire's (PipeWireAudioSource.borrow)
        }
        // stop() may have come before the source was published: it could not interrupt it.
        guard running.load(ordering: .relaxed) else { return }
        var planned = encoder.settings.expectedPacketLossPercent
        let n = encoder.settings.samplesPerChannel
        while running.load(ordering: .relaxed) {
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
                    state.withLock { s in
                        s.stats.framesEncoded += 1
                        s.stats.bytesEncoded += opus.count
                        s.stats.lastLevel = level
                        s.stats.expectedLossPercent = planned
                        s.stats.ringDropped = source.droppedSamples
                        s.stats.silenceInserted = source.silenceInserted
                        s.stats.sink = source.currentSink
                    }
                } catch {
                    state.withLock { $0.stats.encodeErrors += 1 }
                }
            case .timeout:
                state.withLock { $0.stats.captureTimeouts += 1 }
            case .interrupted:
                return
            case .error(let e):
                log.write(LogLine(.warning, "audio_capture_failed", [("reason", e.message), ("effect", "video only until media restarts")]))
                state.withLock { $0.stats.unavailable = e.message }
                return
            }
        }
    }
}
