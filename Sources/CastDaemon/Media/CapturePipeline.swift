import CastCapture
import CastCore
import CastEncode
import CastMedia
import CastSignaling
import Foundation
import Synchronization

/// Screen → H.264 for a cast (issue 5 through issue 6): a capture thread that
/// paces to the frame rate and writes frames into the source's ring (its XShm
/// segments, no copy), and an encode thread that always takes the newest
/// ready frame, scales it under the caps (≤ 1080p30, spec §12), encodes it
/// (VA-API first, then x264) and hands the access unit to the peer. The ring
/// drops frames when the encoder is behind; nothing ever queues, so latency
/// cannot grow (DESIGN: a frame is encoded now or dropped).
public final class CapturePipeline: MediaPipeline, @unchecked Sendable {
    public struct Statistics: Sendable, Equatable {
        public var captured: UInt64 = 0
        public var encoded: UInt64 = 0
        public var keyframes: UInt64 = 0
        public var ringDropped: UInt64 = 0
        public var ringSkipped: UInt64 = 0
        /// Frames encoded again because the source sent nothing for a refresh interval.
        public var refreshes: UInt64 = 0
        public var encoder: String = "-"
    }

    private let options: SessionOptions
    /// castd's environment: DISPLAY, WAYLAND_DISPLAY, the session bus (backend choice).
    private let environment: [String: String]
    private let log: LogSink
    private let clock = SystemMonotonicClock()
    private let running = Atomic<Bool>(false)
    private let keyframeWanted = Atomic<Bool>(false)
    private let lock = NSLock()
    private var sink: (@Sendable ([UInt8], Instant) -> Void)? = nil   // guarded by `lock`
    private var stats = Statistics()                                 // guarded by `lock`
    private var finished: DispatchSemaphore? = nil                   // owner only

    public init(options: SessionOptions, environment: [String: String] = [:], log: LogSink) {
        self.options = options
        self.environment = environment
        self.log = log
    }

    public func attach(sink: @escaping @Sendable ([UInt8], Instant) -> Void) { lock.withLock { self.sink = sink } }
    public func requestKeyframe() { keyframeWanted.store(true, ordering: .relaxed) }
    public var statistics: Statistics { lock.withLock { stats } }

    /// The receiver's preferences (spec §5) as capture caps: never above 1080p30 (spec §12).
    static func caps(for prefs: CastSignaling.StreamPrefs) -> CaptureCaps {
        let resolution = CastMedia.StreamPrefs.Resolution(rawValue: prefs.resolution ?? "1080p") ?? .p1080
        return CaptureCaps.default.applying(CastMedia.StreamPrefs(resolution: resolution, frameRate: prefs.frameRate ?? 30))
    }

    public func start(_ prefs: CastSignaling.StreamPrefs) async {
        guard !running.exchange(true, ordering: .relaxed) else { return }
        let caps = Self.caps(for: prefs)
        let done = DispatchSemaphore(value: 0)
        finished = done
        let t = Thread { [self] in
            captureLoop(caps: caps)
            done.signal()
        }
        t.name = "castd-capture"
        t.start()
    }

    public func stop() async {
        guard running.exchange(false, ordering: .relaxed), let done = finished else { return }
        finished = nil
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async { done.wait(); c.resume() }
        }
        let s = statistics
        log.write(LogLine(.info, "media_stopped", [("captured", s.captured), ("encoded", s.encoded),
                                                  ("ring_dropped", s.ringDropped), ("refreshes", s.refreshes),
                                                  ("encoder", s.encoder)]))
    }

    // MARK: - Capture thread

    private func captureLoop(caps: CaptureCaps) {
        let requested = CaptureBackendKind(rawValue: options.capture.rawValue)   // nil: auto
        let choice = CaptureDoctor.select(requested: requested, environment: environment)
        log.write(LogLine(.info, "capture_backend", [("backend", choice.backend.rawValue), ("reason", choice.reason)]))
        while running.load(ordering: .relaxed) {
            switch choice.backend {
            case .x11:
                let source: XShmSource
                do {
                    source = try XShmSource(options: .init(display: options.display, output: options.output,
                                                          cursor: options.cursor), clock: clock)
                } catch {
                    openFailed(error)
                    continue
                }
                run(source, backend: "xshm", caps: caps, ended: { nil })
            case .mutter:
                let cast: MutterScreenCastSession
                let source: PipeWireSource
                do {
                    cast = try MutterScreenCast.start(options: .init(
                        busAddress: environment["DBUS_SESSION_BUS_ADDRESS"], connector: options.output ?? "",
                        cursorMode: options.cursor ? .metadata : .hidden))
                    log.write(LogLine(.info, "mutter_cast", [("session", cast.grant.session), ("node", cast.grant.node)]))
                    do {
                        source = try PipeWireSource(options: .init(remote: cast.remote, node: cast.grant.node,
                                                                   cursor: options.cursor), clock: clock)
                    } catch {
                        cast.close()
                        throw error
                    }
                } catch {
                    openFailed(error)
                    continue
                }
                run(source, backend: "mutter", caps: caps, ended: { cast.poll() })
                cast.close()
            case .portal:
                openFailed(CastError(.capture, "the ScreenCast portal backend is not wired into the cast yet; use --capture mutter on GNOME"))
            }
        }
    }

    private func openFailed(_ error: any Error) {
        let text = (error as? CastError)?.message ?? "\(error)"
        log.write(LogLine(.error, "capture_open_failed", [("error", text), ("retry_s", 2)]))
        sleepWhileRunning(.seconds(2))
    }

    /// Captures from `source` until it ends, the cast stops, or `ended` says why the backend ended it.
    private func run<Source: FrameSource>(_ source: Source, backend: String, caps: CaptureCaps,
                                          ended: () -> String?) {
        log.write(LogLine(.info, "capture_started", [("backend", backend), ("size", "\(source.size)"),
                                                    ("fps", caps.maxFrameRate)]))
        let published = DispatchSemaphore(value: 0)
        let encoderDone = DispatchSemaphore(value: 0)
        let generation = Flag(true)
        let refresh = Flag(false)
        let ring = source.ring, captured = source.size
        let encoder = Thread { [self] in
            encodeLoop(ring: ring, captured: captured, caps: caps, published: published, alive: generation, refresh: refresh)
            encoderDone.signal()
        }
        encoder.name = "castd-encode"
        encoder.start()

        var pacer = FramePacer(frameRate: caps.maxFrameRate, start: clock.now())
        capturing: while running.load(ordering: .relaxed) {
            if let sentence = ended() {
                log.write(LogLine(.error, "capture_ended", [("backend", backend), ("error", sentence)]))
                break capturing
            }
            let wait = pacer.nextTick - clock.now()
            if wait > .zero { Thread.sleep(forTimeInterval: wait.seconds) }
            let now = clock.now()
            let outcome = source.capture(onlyIfChanged: !pacer.refreshDue(now: now))
            switch outcome {
            case .frame:
                _ = pacer.decide(now: now, changed: true)
                lock.withLock { stats.captured += 1 }
                published.signal()
            case .timeout:
                // A compositor that sends frames only on damage (Mutter, the
                // portal) sent nothing: the encoder repeats its last frame once
                // per refresh interval so that a still screen still reaches the receiver.
                if pacer.decide(now: now, changed: false) == .refresh {
                    refresh.set(true)
                    published.signal()
                }
            case .reinit(let size):
                log.write(LogLine(.notice, "capture_reinit", [("size", "\(size)")]))
                break capturing
            case .interrupted:
                break capturing
            case .error(let e):
                log.write(LogLine(.error, "capture_failed", [("error", e.message)]))
                sleepWhileRunning(.milliseconds(500))
                break capturing
            }
        }
        generation.set(false)
        published.signal()
        encoderDone.wait()   // the encoder reads the source's memory: it stops first
        let ringStats = source.ring.stats
        lock.withLock {
            stats.ringDropped += ringStats.dropped
            stats.ringSkipped += ringStats.skipped
        }
    }

    private func sleepWhileRunning(_ d: Duration) {
        let end = clock.now() + d
        while running.load(ordering: .relaxed), clock.now() < end { Thread.sleep(forTimeInterval: 0.05) }
    }

    // MARK: - Encode thread

    private func encodeLoop<Slot: FrameSlot>(ring: FrameRing<Slot>, captured: FrameSize, caps: CaptureCaps,
                                             published: DispatchSemaphore, alive: Flag, refresh: Flag) {
        let config = EncoderConfig(caps: caps, captured: captured)
        let preference = EncoderPreference(rawValue: options.encoder.rawValue) ?? .auto
        let log = self.log
        let chain = EncoderChain(preference: preference, config: config) { line in
            log.write(LogLine(.info, "encoder", [("detail", line)]))
        }
        do { try chain.start() } catch {
            log.write(LogLine(.error, "encoder_unavailable", [("error", "\(error)")]))
            return
        }
        lock.withLock { stats.encoder = chain.current.map { "\($0.kind.rawValue)" } ?? "-" }
        let target = config.size
        let scaler = target == captured ? nil : Scaler(from: captured, to: target)
        let scaled = scaler.map { _ in MemorySlot(capacity: target.width * target.height * 4) }
        if scaler != nil {
            log.write(LogLine(.info, "scaling", [("from", "\(captured)"), ("to", "\(target)")]))
        }
        // The last frame encoded stays leased (or, scaled, in `scaled`) so a refresh can encode it again.
        var held: FrameRing<Slot>.ReadLease? = nil
        var last: (frame: Frame, pixels: UnsafeRawPointer)? = nil
        defer { if let held { ring.finishRead(held) } }
        while alive.value {
            _ = published.wait(timeout: .now() + .milliseconds(200))
            guard alive.value else { break }
            var frame: Frame
            var pixels: UnsafeRawPointer
            var repeated = false
            if let lease = ring.takeNewest() {
                if let h = held { ring.finishRead(h) }
                held = nil
                frame = lease.frame
                pixels = UnsafeRawPointer(lease.slot.bytes)
                if let scaler, let scaled {
                    scaler.scale(pixels, srcStride: frame.stride, into: scaled.bytes, dstStride: target.width * 4)
                    ring.finishRead(lease)   // the scaled copy is ours; the segment can be reused now
                    frame = Frame(format: frame.format, size: target, stride: target.width * 4,
                                  captureTime: frame.captureTime, damage: nil)
                    pixels = UnsafeRawPointer(scaled.bytes)
                } else {
                    held = lease
                }
                last = (frame, pixels)
            } else if refresh.value, let l = last {
                refresh.set(false)
                frame = Frame(format: l.frame.format, size: l.frame.size, stride: l.frame.stride,
                              captureTime: clock.now(), damage: nil)
                pixels = l.pixels
                repeated = true
            } else {
                continue
            }
            if keyframeWanted.exchange(false, ordering: .relaxed) { chain.requestKeyframe() }
            do {
                guard let au = try chain.encode(pixels: pixels, frame: frame) else { continue }
                let sink = lock.withLock { () -> (@Sendable ([UInt8], Instant) -> Void)? in
                    stats.encoded += 1
                    if repeated { stats.refreshes += 1 }
                    if au.isKeyframe { stats.keyframes += 1 }
                    stats.encoder = chain.current.map { "\($0.kind.rawValue)" } ?? "-"
                    return self.sink
                }
                sink?(au.bytes, au.pts)
            } catch {
                log.write(LogLine(.error, "encode_failed", [("error", "\(error)")]))
                return
            }
        }
    }
}

/// A boolean two threads share (one writes, one reads).
final class Flag: Sendable {
    private let atomic: Atomic<Bool>
    init(_ v: Bool) { atomic = Atomic(v) }
    var value: Bool { atomic.load(ordering: .relaxed) }
    func set(_ v: Bool) { atomic.store(v, ordering: .relaxed) }
}
