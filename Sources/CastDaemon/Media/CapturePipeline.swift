import CastCapture
import CastCore
import CastEncode
import CastMedia
import CastSignaling
import Dispatch
import FoundationEssentials
import Synchronization

/// Screen → H.264 for a cast (issue 5 through issue 6): a capture thread that
/// reads the screen when it changes (issue 19: XDamage or a PipeWire buffer, at most
/// at the frame rate, see `CaptureScheduler`) and writes frames into the source's ring (its XShm
/// segments, no copy; or PipeWire buffers copied in through the ScreenCast
/// portal), and an encode thread that always takes the newest
/// ready frame, scales it under the caps (≤ 1080p30, spec §12), encodes it
/// (VA-API first, then x264) and hands the access unit to the peer. The ring
/// drops frames when the encoder is behind; nothing ever queues, so latency
/// cannot grow (docs/architecture.md: a frame is encoded now or dropped).
public final class CapturePipeline: MediaPipeline, @unchecked Sendable {
    public struct Statistics: Sendable, Equatable {
        public var captured: UInt64 = 0
        public var encoded: UInt64 = 0
        public var keyframes: UInt64 = 0
        /// Frames the ring dropped (capture found no free slot) and skipped (the encoder
        /// took a newer one), over every capture source of the cast, the current one included.
        public var ringDropped: UInt64 { endedRingDropped + currentRing.dropped }
        public var ringSkipped: UInt64 { endedRingSkipped + currentRing.skipped }
        var endedRingDropped: UInt64 = 0
        var endedRingSkipped: UInt64 = 0
        var currentRing = FrameRingStats()
        public var encoder: String = "-"
        /// Frames not encoded because the peer's pacer still held more than a frame
        /// interval of earlier media (a congested link: encoding them would only queue).
        public var congestionSkipped: UInt64 = 0
        /// The congestion controller's latest target (0: none yet) and what the ladder made of it.
        public var targetBitrate = 0
        public var encoderBitrate = 0
        public var frameRate = 0
        /// When the last access unit came out of the encoder: the media's progress signal
        /// (issue 17; a still screen is refreshed a little under every second, so it moves too).
        public var lastFrameAt: Instant? = nil
        public var firstFrameAt: Instant? = nil
        /// Per-frame durations since the last `drainStageTimes()`: XShm capture, downscale,
        /// BGRx → I420/NV12, encode, and capture time → access unit out (the sum plus waits).
        public var capture = StageTimes(), scale = StageTimes(), convert = StageTimes()
        public var encode = StageTimes(), captureToEncoded = StageTimes()
    }

    /// Where frames come from (`--capture`, resolved: auto is decided before).
    public enum Backend: String, Sendable { case x11, portal, mutter }

    private let options: SessionOptions
    private let backend: Backend
    private let portalOptions: ScreenCastPortal.Options
    private let mutterOptions: MutterScreenCast.Options
    private let log: LogSink
    private let clock = SystemMonotonicClock()
    private let running = Atomic<Bool>(false)
    private let keyframeWanted = Atomic<Bool>(false)
    /// The congestion controller's target in bit/s (0 until the first estimate), written by the
    /// peer's thread, read by the encode thread on every frame.
    private let targetBitrate = Atomic<Int>(0)
    /// The frame rate the ladder chose (0: the caps'), written by the encode thread, read by capture.
    private let wantedFrameRate = Atomic<Int>(0)
    /// The negotiated codec and H.264 profile (`setCodec`, as `VideoFormat.code`); the encode
    /// thread follows it at its next frame.
    private let wantedCodec = Atomic<UInt8>(0)
    private let lock = Lock()
    private var sink: (@Sendable ([UInt8], Instant) -> Void)? = nil   // guarded by `lock`
    private var needsUser: (@Sendable (String) -> Void)? = nil          // guarded by `lock`
    private var backlog: (@Sendable () -> Duration)? = nil              // guarded by `lock`
    private var failed: (@Sendable (String) -> Void)? = nil             // guarded by `lock`
    private var sourceEnded: (@Sendable (String) -> Void)? = nil        // guarded by `lock`
    private var sharingKnown: (@Sendable (String) -> Void)? = nil       // guarded by `lock`
    private let fault: MediaFault?
    private var stats = Statistics()                                 // guarded by `lock`
    private var finished: DispatchSemaphore? = nil                   // owner only

    public init(options: SessionOptions, log: LogSink, backend: Backend = .x11,
                portal: ScreenCastPortal.Options = ScreenCastPortal.Options(),
                mutter: MutterScreenCast.Options = MutterScreenCast.Options(), fault: MediaFault? = nil) {
        self.options = options
        self.fault = fault
        self.log = log
        self.backend = backend
        portalOptions = portal
        mutterOptions = mutter
    }

    public func attach(sink: @escaping @Sendable ([UInt8], Instant) -> Void) { lock.withLock { self.sink = sink } }
    public func requestKeyframe() { keyframeWanted.store(true, ordering: .relaxed) }
    /// The congestion controller's target for the media (issue 14); applied at the next frame.
    public func setTargetBitrate(_ bitsPerSecond: Int) { targetBitrate.store(max(0, bitsPerSecond), ordering: .relaxed) }
    /// How much media the sink (the peer's pacer) still holds, as time at its pacing rate.
    public func attach(backlog: @escaping @Sendable () -> Duration) { lock.withLock { self.backlog = backlog } }
    public func setCodec(_ codec: VideoCodec, h264Profile: H264ProfileLevel?) {
        wantedCodec.store(VideoFormat(codec: codec, h264Profile: h264Profile ?? .constrainedBaseline).code, ordering: .relaxed)
    }
    private var format: VideoFormat { VideoFormat(code: wantedCodec.load(ordering: .relaxed)) }
    public func onNeedsUser(_ handler: @escaping @Sendable (String) -> Void) { lock.withLock { needsUser = handler } }
    public func onFailure(_ handler: @escaping @Sendable (String) -> Void) { lock.withLock { failed = handler } }
    public func onSourceEnded(_ handler: @escaping @Sendable (String) -> Void) { lock.withLock { sourceEnded = handler } }
    /// What is shared became known (the portal's Start said which stream: "monitor 1280x720 at 0,0
    /// through the portal"), in `castd status`'s words.
    public func onSharingKnown(_ handler: @escaping @Sendable (String) -> Void) { lock.withLock { sharingKnown = handler } }
    public var lastFrameAt: Instant? { lock.withLock { stats.lastFrameAt } }

    /// The encode thread gave up (issue 17): the session decides (reopen, or end the cast).
    private func mediaFailed(_ reason: String) { lock.withLock { failed }?(reason) }
    public var statistics: Statistics { lock.withLock { stats } }

    /// The capture backend this cast uses (`--capture` resolved).
    public var captureBackend: Backend { backend }

    /// The stage summaries of the window since the last call, as key=value log fields
    /// ("p50/p95/max" in ms); the window starts afresh.
    public func drainStageTimes() -> [(String, String)] {
        lock.withLock {
            let stages: [(String, WritableKeyPath<Statistics, StageTimes>)] = [
                ("capture_ms", \.capture), ("scale_ms", \.scale), ("convert_ms", \.convert),
                ("encode_ms", \.encode), ("capture_to_encoded_ms", \.captureToEncoded)]
            return stages.compactMap { name, path in stats[keyPath: path].drain().map { (name, $0.milliseconds) } }
        }
    }

    /// The receiver's preferences (spec §5) applied under the cast's caps: never above
    /// 1080p30 (spec §12), nor above what the configuration lowered them to (`SessionOptions.caps`).
    static func caps(for prefs: CastSignaling.StreamPrefs, under base: CaptureCaps = .default) -> CaptureCaps {
        let resolution = CapturePreferences.Resolution(rawValue: prefs.resolution ?? "1080p") ?? .p1080
        return base.applying(CapturePreferences(resolution: resolution, frameRate: prefs.frameRate ?? 30))
    }

    public func start(_ prefs: CastSignaling.StreamPrefs) async {
        guard !running.exchange(true, ordering: .relaxed) else { return }
        let caps = Self.caps(for: prefs, under: options.caps)
        let done = DispatchSemaphore(value: 0)
        finished = done
        SystemThread.start(name: "castd-capture") { [self] in
            captureLoop(caps: caps)
            done.signal()
        }
    }

    public func stop() async {
        guard running.exchange(false, ordering: .relaxed), let done = finished else { return }
        finished = nil
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async { done.wait(); c.resume() }
        }
        let s = statistics
        log.write(LogLine(.info, "media_stopped", [("captured", s.captured), ("encoded", s.encoded),
                                                  ("ring_dropped", s.ringDropped), ("encoder", s.encoder)]))
    }

    // MARK: - Capture thread

    /// How a capture generation ended.
    enum GenerationEnd { case reinit, stopped, failed, sourceEnded }

    private func captureLoop(caps: CaptureCaps) {
        // The portal session outlives capture generations (a size change
        // reopens the stream, not the session); it ends with the cast or on failure.
        var portal: ScreenCastPortalSession? = nil
        var mutter: MutterScreenCastSession? = nil
        defer {
            portal?.close()
            mutter?.close()
        }
        while running.load(ordering: .relaxed) {
            switch backend {
            case .x11 where options.source == .window:
                let source: XCompositeWindowSource
                do {
                    source = try XCompositeWindowSource(options: .init(display: options.display, window: options.window ?? "",
                                                                       caps: caps), clock: clock, log: log.write)
                } catch let e as CastError where e.code == .noSuchWindow {
                    // The window closed before (or between) capture generations: as when it closes during one.
                    endedForGood(e.message)
                    continue
                } catch {
                    openFailed(error)
                    continue
                }
                // The window actually opened (its title and id), for `castd status` and the notification,
                // as the portal's stream is reported below.
                lock.withLock { sharingKnown }?("window '\(source.window.title)' \(source.window.hexID) of screen \(options.display ?? "$DISPLAY")")
                if runGeneration(source, backend: "xcomposite", caps: caps,
                                 sharing: "window '\(source.window.title)' \(source.window.hexID)") == .sourceEnded {
                    endedForGood(nil)
                }
            case .x11:
                let source: XShmSource
                do {
                    source = try XShmSource(options: .init(display: options.display, output: options.output,
                                                          cursor: options.cursor), clock: clock)
                } catch {
                    openFailed(error)
                    continue
                }
                _ = runGeneration(source, backend: "xshm", caps: caps,
                                  sharing: options.output.map { "monitor \($0)" } ?? "screen \(options.display ?? "$DISPLAY") (XShm)")
            case .portal:
                do {
                    if portal == nil {
                        // Issue 31: a saved token says what it restores, before the portal is asked.
                        if let saved = try? portalOptions.tokenStore?.loadSaved() {
                            log.write(LogLine(.info, "portal_restore", [("restoring", saved.restores)]))
                        }
                        let cast = try ScreenCastPortal.start(options: portalOptions)
                        let stream = cast.grant.streams[0]
                        log.write(LogLine(.info, "portal_started", [
                            ("streams", cast.grant.streams.count), ("node", stream.node),
                            ("asked_for", "\(portalOptions.sourceType)"),
                            ("sharing", PortalSourceType.name(stream.sourceType) ?? "unknown (the portal did not say)"),
                            ("portal_said", stream.reportedSourceType.map { "\(PortalSourceType.name($0) ?? "\($0)") (not what was asked for; taken as \(portalOptions.sourceType))" } ?? "as asked"),
                            ("stream", stream.described), ("stream_id", stream.id ?? "none"),
                            ("mapping_id", stream.mappingId ?? "none"),
                            ("cursor", "\(cast.grant.cursorMode)"),
                            ("restore_token", cast.grant.refusedRestoreToken ? "refused, asked again"
                                : cast.grant.offeredRestoreToken ? "offered" : "none saved"),
                            ("token_saved", cast.grant.restoreToken != nil && portalOptions.tokenStore != nil)]))
                        portal = cast
                        lock.withLock { sharingKnown }?("\(stream.described) through the portal")
                    }
                    let cast = portal!
                    let source = try PipeWireSource(options: .init(remote: cast.remote, node: cast.grant.streams[0].node,
                                                                   cursor: options.cursor), clock: clock)
                    if runGeneration(source, backend: "portal", caps: caps) == .failed {
                        portal?.close()   // the cast ended; the next generation asks the portal again
                        portal = nil
                    }
                } catch let e as CastError where e.code == .captureNeedsUser {
                    // The dialog waits for a person who is not there: asking again would only
                    // wait again. Say so, let the session end the cast, and stop trying.
                    portal?.close()
                    portal = nil
                    log.write(LogLine(.error, "capture_needs_user", [("error", e.message)]))
                    lock.withLock { needsUser }?(e.message)
                    while running.load(ordering: .relaxed) { sleepWhileRunning(.seconds(1)) }
                } catch {
                    portal?.close()
                    portal = nil
                    openFailed(error)
                }
            case .mutter:
                // Like the portal's, the Mutter session spans generations; Mutter's
                // `Closed` (seen by `poll`) or a failed stream ends it.
                do {
                    if mutter == nil {
                        let cast = try MutterScreenCast.start(options: mutterOptions)
                        log.write(LogLine(.info, "mutter_cast", [("session", cast.grant.session), ("node", cast.grant.node),
                                                                 ("cursor", "\(cast.grant.cursorMode)")]))
                        mutter = cast
                    }
                    let cast = mutter!
                    let source = try PipeWireSource(options: .init(remote: cast.remote, node: cast.grant.node,
                                                                   cursor: options.cursor), clock: clock)
                    if runGeneration(source, backend: "mutter", caps: caps, ended: { cast.poll() }) == .failed {
                        mutter?.close()
                        mutter = nil
                    }
                } catch {
                    mutter?.close()
                    mutter = nil
                    openFailed(error)
                }
            }
        }
    }

    /// What was shared is gone (issue 31): say so once (the sentence, when the source did not
    /// already end with one), let the session end the cast, and capture nothing more.
    private func endedForGood(_ sentence: String?) {
        if let sentence {
            log.write(LogLine(.notice, "capture_source_ended", [("reason", sentence)]))
            lock.withLock { sourceEnded }?(sentence)
        }
        while running.load(ordering: .relaxed) { sleepWhileRunning(.seconds(1)) }
    }

    private func openFailed(_ error: any Error) {
        let text = (error as? CastError)?.message ?? "\(error)"
        log.write(LogLine(.error, "capture_open_failed", [("error", text), ("retry_s", 2)]))
        sleepWhileRunning(.seconds(2))
    }

    /// Captures from one source until it must be reopened (size change), fails, or the cast stops.
    /// `ended` is asked before each frame: a sentence when the backend's session is over.
    private func runGeneration<S: FrameSource>(_ source: S, backend: String, caps: CaptureCaps, sharing: String? = nil,
                                               ended: () -> String? = { nil }) -> GenerationEnd {
        log.write(LogLine(.info, "capture_started", [("backend", backend), ("size", "\(source.size)"),
                                                    ("fps", caps.maxFrameRate), ("sharing", sharing ?? backend)]))
        let published = DispatchSemaphore(value: 0)
        let encoderDone = DispatchSemaphore(value: 0)
        let generation = Flag(true)
        let ring = source.ring, captured = source.size
        SystemThread.start(name: "castd-encode") { [self] in
            encodeLoop(ring: ring, captured: captured, caps: caps, published: published, alive: generation)
            encoderDone.signal()
        }

        var end = GenerationEnd.stopped
        // A refresh a little under every second: with scheduling delays, a still
        // screen still reaches the receiver at least once in every second.
        var scheduler = CaptureScheduler(frameRate: caps.maxFrameRate, now: clock.now(),
                                         refreshInterval: .milliseconds(900), probes: source.changesNeedProbing,
                                         phaseLock: source.notifiesEachChange)
        var keyframeNoted = false
        capturing: while running.load(ordering: .relaxed) {
            if let sentence = ended() {
                log.write(LogLine(.error, "capture_ended", [("backend", backend), ("error", sentence)]))
                sleepWhileRunning(.milliseconds(500))   // as after a failure: no tight reopen loop
                end = .failed
                break capturing
            }
            // The ladder's frame rate is the scheduler's minimum interval (issue 14, 19).
            let ladderRate = wantedFrameRate.load(ordering: .relaxed)
            let rate = ladderRate > 0 ? min(ladderRate, caps.maxFrameRate) : caps.maxFrameRate
            if rate != scheduler.frameRate { scheduler.handle(.frameRate(rate), now: clock.now()) }
            if let fault, fault == .captureStall || fault == .stuck,
               MediaFault.due(first: statistics.firstFrameAt, now: clock.now()), MediaFault.fireOnce() {
                simulateStall(fault)
            }
            // A keyframe request (the peer just connected, or the receiver sent a PLI) reads the
            // screen at the next allowed instant, changed or not: on a still screen the next
            // refresh could be 900 ms away. The flag stays set until the encoder takes it.
            let wanted = keyframeWanted.load(ordering: .relaxed)
            if wanted && !keyframeNoted { scheduler.handle(.keyframeWanted, now: clock.now()) }
            keyframeNoted = wanted
            scheduler.handle(.timeout, now: clock.now())
            var deadline: Instant
            drain: while true {
                switch scheduler.poll() {
                case .wait(let until):
                    deadline = until
                    break drain
                case .capture(let reason):
                    let now = clock.now()
                    let droppedBefore = source.ring.stats.dropped
                    switch source.capture(onlyIfChanged: reason.onlyIfChanged) {
                    case .frame:
                        scheduler.handle(.captured, now: now)
                        let took = clock.now() - now
                        let ringNow = source.ring.stats
                        lock.withLock { stats.captured += 1; stats.capture.record(took); stats.currentRing = ringNow }
                        published.signal()
                    case .timeout:
                        if reason == .keyframe {
                            // No slot to read into (or, PipeWire, the last frame's slot is being
                            // encoded): the key frame is still wanted, an interval later.
                            scheduler.handle(.keyframeWanted, now: now)
                        } else if source.ring.stats.dropped > droppedBefore {
                            // Every slot was busy: the change is still to be read, an interval later.
                            scheduler.handle(.changeUnread, now: now)
                        } else if reason.onlyIfChanged {
                            scheduler.handle(.nothingChanged, now: now)
                        }
                    case .reinit(let size):
                        log.write(LogLine(.notice, "capture_reinit", [("size", "\(size)")]))
                        end = .reinit
                        break capturing
                    case .interrupted:
                        break capturing
                    case .sourceEnded(let sentence):
                        log.write(LogLine(.notice, "capture_source_ended", [("backend", backend), ("reason", sentence)]))
                        lock.withLock { sourceEnded }?(sentence)
                        end = .sourceEnded
                        break capturing
                    case .error(let e):
                        log.write(LogLine(.error, "capture_failed", [("error", e.message)]))
                        sleepWhileRunning(.milliseconds(500))
                        end = .failed
                        break capturing
                    }
                }
            }
            // Until the source reports a change or the scheduler's deadline; at most 50 ms, so
            // that a stop, a keyframe request or a new frame rate is seen within that. A change
            // already known only waits for the deadline unless the source reports each change
            // (XDamage, for the phase lock): PipeWire's "a frame is there" stays true until the
            // frame is taken, and asking again would spin.
            let until = min(deadline, clock.now() + .milliseconds(50))
            if scheduler.pending && !source.notifiesEachChange {
                let left = until - clock.now()
                if left > .zero { SystemThread.sleep(left) }
            } else if source.waitForChange(until: until) {
                scheduler.handle(.changed, now: clock.now())
            }
        }
        generation.set(false)
        published.signal()
        encoderDone.wait()   // the encoder reads the source's slots: it stops first
        let ringStats = source.ring.stats
        lock.withLock {
            stats.endedRingDropped += ringStats.dropped
            stats.endedRingSkipped += ringStats.skipped
            stats.currentRing = FrameRingStats()
        }
        return end
    }

    /// Test-only (`MediaFault`): the source delivers nothing until the cast stops, or, `stuck`,
    /// the thread hangs and ignores the stop.
    private func simulateStall(_ fault: MediaFault) {
        log.write(LogLine(.warning, "test_fault", [("fault", fault.rawValue)]))
        if fault == .stuck { while true { SystemThread.sleep(.seconds(1)) } }
        while running.load(ordering: .relaxed) { SystemThread.sleep(.milliseconds(50)) }
    }

    private func sleepWhileRunning(_ d: Duration) {
        let end = clock.now() + d
        while running.load(ordering: .relaxed), clock.now() < end { SystemThread.sleep(.milliseconds(50)) }
    }

    // MARK: - Encode thread

    /// Feeds the latest target to the ladder and applies its decision to the encoder (and,
    /// through `wantedFrameRate`, to the capture thread). Encode thread only.
    private func adapt(_ ladder: inout RateLadder, chain: EncoderChain, output: inout OutputRate) {
        let target = targetBitrate.load(ordering: .relaxed)
        guard target > 0 else { return }
        let now = clock.now()
        guard let d = ladder.update(targetBitrate: target, outputBitrate: output.bitsPerSecond(now: now), now: now) else { return }
        let fpsChanged = d.frameRate != chain.config.frameRate
        do {
            try chain.setBitrate(d.bitrate)
            if fpsChanged { try chain.setFrameRate(d.frameRate) }
        } catch {
            log.write(LogLine(.warning, "rate_change_failed", [("bitrate", d.bitrate), ("fps", d.frameRate), ("error", "\(error)")]))
            return
        }
        wantedFrameRate.store(d.frameRate, ordering: .relaxed)
        lock.withLock {
            stats.targetBitrate = target
            stats.encoderBitrate = d.bitrate
            stats.frameRate = d.frameRate
        }
        if fpsChanged {
            log.write(LogLine(.info, "rate_change", [("target_kbps", target / 1000), ("encoder_kbps", d.bitrate / 1000),
                                                    ("fps", d.frameRate), ("size", "\(ladder.size)")]))
        }
    }

    private func encodeLoop<Slot: FrameSlot>(ring: FrameRing<Slot>, captured: FrameSize, caps: CaptureCaps,
                                             published: DispatchSemaphore, alive: Flag) {
        let config = EncoderConfig(caps: caps, captured: captured)
        let preference = EncoderPreference(rawValue: options.encoder.rawValue) ?? .auto
        let log = self.log
        // One chain per codec: a re-offer may land on another codec (spec §7), and the
        // chain is rebuilt for it at the next frame, without restarting anything else.
        func makeChain(_ format: VideoFormat) -> EncoderChain? {
            let codec = format.codec
            var config = config
            config.h264Profile = format.h264Profile
            let chain = EncoderChain(codec: codec, preference: preference, config: config, log: log.write)
            do {
                if fault == .encoderFailAlways { throw CastError(.init("test_fault"), "test fault encoder-fail-always") }
                try chain.start()
            } catch {
                log.write(LogLine(.error, "encoder_unavailable", [("codec", codec.rawValue), ("error", "\(error)")]))
                mediaFailed("the encoder could not start: \((error as? CastError)?.message ?? "\(error)")")
                return nil
            }
            return chain
        }
        var encoding = format
        guard var chain = makeChain(encoding) else { return }
        lock.withLock {
            stats.encoder = chain.current.map { "\($0.kind.rawValue)" } ?? "-"
            stats.encoderBitrate = config.bitrate
            stats.frameRate = config.frameRate
        }
        let target = config.size
        // Issue 14: the controller's target sets the encoder's bitrate and, below thresholds,
        // the frame rate; the resolution stays (spec §7 maintainResolution).
        var ladder = RateLadder(size: target, maxFrameRate: config.frameRate, maxBitrate: config.bitrate)
        var output = OutputRate()
        let backlog = lock.withLock { self.backlog }
        var gate = BacklogGate()
        let scaler = target == captured ? nil : Scaler(from: captured, to: target)
        let scaled = scaler.map { _ in MemorySlot(capacity: target.width * target.height * 4) }
        if scaler != nil {
            log.write(LogLine(.info, "scaling", [("from", "\(captured)"), ("to", "\(target)")]))
        }
        while alive.value {
            _ = published.wait(timeout: .now() + .milliseconds(200))
            guard alive.value else { break }
            guard let lease = ring.takeNewest() else { continue }
            if format != encoding {
                let next = format
                log.write(LogLine(.info, "encoder_codec", [("from", encoding), ("to", next)]))
                encoding = next
                guard let next = makeChain(next) else { ring.finishRead(lease); return }
                chain = next   // its first picture is a keyframe (EncoderChain.start)
                // The new chain starts at the caps: a fresh ladder applies the current target to it.
                ladder = RateLadder(size: target, maxFrameRate: config.frameRate, maxBitrate: config.bitrate)
            }
            adapt(&ladder, chain: chain, output: &output)
            // Drop, never queue (docs/architecture.md): while the pacer would still hold more than a frame
            // interval of earlier media when this frame reached it (or the burst allowance
            // after a frame far over budget: BacklogGate), the frame would only wait there.
            let interval = Duration.nanoseconds(1_000_000_000 / Int64(max(1, ladder.current.frameRate)))
            if let held = backlog?(), gate.shouldSkip(backlog: held, frameInterval: interval) {
                ring.finishRead(lease)
                lock.withLock { stats.congestionSkipped += 1 }
                continue
            }
            if keyframeWanted.exchange(false, ordering: .relaxed) { chain.requestKeyframe() }
            var frame = lease.frame
            var pixels = UnsafeRawPointer(lease.slot.bytes)
            if let scaler, let scaled {
                let t0 = clock.now()
                scaler.scale(pixels, srcStride: frame.stride, into: scaled.bytes, dstStride: target.width * 4)
                let took = clock.now() - t0
                lock.withLock { stats.scale.record(took) }
                ring.finishRead(lease)   // the scaled copy is ours; the segment can be reused now
                frame = Frame(format: frame.format, size: target, stride: target.width * 4,
                              captureTime: frame.captureTime, damage: nil)
                pixels = UnsafeRawPointer(scaled.bytes)
            }
            // Without a scaler the encoder reads the slot itself: the chain lets go of it
            // once the pixels are converted (one XShm slot is then enough; issue 19).
            var slotHeld = scaler == nil
            func releaseSlot() {
                if slotHeld { ring.finishRead(lease) }
                slotHeld = false
            }
            do {
                if fault == .encoderFailOnce, MediaFault.due(first: statistics.firstFrameAt, now: clock.now()),
                   MediaFault.fireOnce() {
                    throw CastError(.init("test_fault"), "test fault encoder-fail-once")
                }
                let au = try chain.encode(pixels: pixels, frame: frame, pixelsRead: releaseSlot)
                releaseSlot()
                // A picture of the codec the peer no longer expects (setCodec came meanwhile) is dropped.
                guard let au, encoding == format else { continue }
                output.record(bytes: au.bytes.count, now: clock.now())
                gate.recordEncode(chain.lastConvertTime + chain.lastEncodeTime)
                let age = clock.now() - au.pts
                let sink = lock.withLock { () -> (@Sendable ([UInt8], Instant) -> Void)? in
                    stats.convert.record(chain.lastConvertTime)
                    stats.encode.record(chain.lastEncodeTime)
                    stats.captureToEncoded.record(age)
                    stats.encoded += 1
                    stats.lastFrameAt = clock.now()
                    if stats.firstFrameAt == nil { stats.firstFrameAt = stats.lastFrameAt }
                    if au.isKeyframe { stats.keyframes += 1 }
                    stats.encoder = chain.current.map { "\($0.kind.rawValue)" } ?? "-"
                    return self.sink
                }
                sink?(au.bytes, au.pts)
            } catch {
                releaseSlot()
                log.write(LogLine(.error, "encode_failed", [("error", "\(error)")]))
                mediaFailed("encoding failed: \((error as? CastError)?.message ?? "\(error)")")
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

/// The encoder's output over the last second (the ladder's measure of what the picture needs).
struct OutputRate {
    private var entries: [(at: Instant, bytes: Int)] = []
    private var head = 0
    private var bytes = 0
    static let window = Duration.seconds(1)

    mutating func record(bytes n: Int, now: Instant) {
        entries.append((now, n))
        bytes += n
        evict(now)
    }

    private mutating func evict(_ now: Instant) {
        while head < entries.count, now - entries[head].at > Self.window {
            bytes -= entries[head].bytes
            head += 1
        }
        if head > 64, head * 2 > entries.count { entries.removeFirst(head); head = 0 }
    }

    /// Bits per second over the window; nil until half a window of output has been seen.
    mutating func bitsPerSecond(now: Instant) -> Int? {
        evict(now)
        guard head < entries.count else { return nil }
        let span = now - entries[head].at
        guard span >= Self.window / 2 else { return nil }
        return Int(Double(bytes * 8) / max(span.seconds, 0.5))
    }
}
