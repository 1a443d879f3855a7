import CastCore
import CastEncode
import CastMedia
import CastSystem
import Dispatch

/// The encode thread of one capture generation: always takes the newest ready frame from
/// the source's ring, scales it under the caps (≤ 1080p30, spec §12), encodes it (VA-API
/// first, then x264; or VP8) and hands the access unit to the peer's sink. A frame the
/// peer's pacer could only queue is skipped (docs/architecture.md: drop, never queue).
struct EncodeLoop: Sendable {
    let preference: EncoderPreference
    let log: LogSink
    let clock: SystemMonotonicClock
    let state: PipelineState
    let faults: FaultInjection
    /// Whether a still picture is refined (`StillRefinement`; off only by a test hook).
    let refineStill: Bool

    /// Runs until `alive` turns false (the capture generation ends) or the encoder fails,
    /// which it reports through `PipelineState.mediaFailed`.
    func run<Slot: FrameSlot>(ring: FrameRing<Slot>, captured: FrameSize, caps: CaptureCaps,
                              published: DispatchSemaphore, alive: Flag) {
        let config = EncoderConfig(caps: caps, captured: captured)
        let log = self.log
        // One chain per codec: a re-offer may land on another codec (spec §7), and the
        // chain is rebuilt for it at the next frame, without restarting anything else.
        func makeChain(_ format: VideoFormat) -> EncoderChain? {
            let codec = format.codec
            var config = config
            config.h264Profile = format.h264Profile
            let chain = EncoderChain(codec: codec, preference: preference, config: config, log: log.write)
            do {
                try faults.failEncoderStart()
                try chain.start()
            } catch {
                log.write(LogLine(.error, "encoder_unavailable", [("codec", codec.rawValue), ("error", "\(error)")]))
                state.mediaFailed("the encoder could not start: \((error as? CastError)?.message ?? "\(error)")")
                return nil
            }
            return chain
        }
        var encoding = state.format
        guard var chain = makeChain(encoding) else { return }
        state.withStats { stats in
            stats.encoder = chain.current.map { "\($0.kind.rawValue)" } ?? "-"
            stats.encoderBitrate = config.bitrate
            stats.frameRate = config.frameRate
        }
        let target = config.size
        var rate = RateAdaptation(config: config)
        let backlog = state.callback(\.backlog)
        var gate = BacklogGate()
        var still = StillRefinement()
        defer { state.stillRefining.store(false, ordering: .relaxed) }
        let scaler = target == captured ? nil : Scaler(from: captured, to: target)
        let scaled = scaler.map { _ in MemorySlot(capacity: target.width * target.height * 4) }
        if scaler != nil {
            log.write(LogLine(.info, "scaling", [("from", "\(captured)"), ("to", "\(target)")]))
        }
        while alive.value {
            _ = published.wait(timeout: .now() + .milliseconds(200))
            guard alive.value else { break }
            guard let lease = ring.takeNewest() else { continue }
            let wanted = state.format
            if wanted != encoding {
                log.write(LogLine(.info, "encoder_codec", [("from", encoding), ("to", wanted)]))
                encoding = wanted
                guard let next = makeChain(wanted) else { ring.finishRead(lease); return }
                chain = next   // its first picture is a keyframe (EncoderChain.start)
                rate.chainReplaced()
            }
            rate.adapt(chain: chain, state: state, now: clock.now(), log: log)
            // Drop, never queue (docs/architecture.md): while the pacer would still hold more than a frame
            // interval of earlier media when this frame reached it (or the burst allowance
            // after a frame far over budget: BacklogGate), the frame would only wait there.
            if let held = backlog?(), gate.shouldSkip(backlog: held, frameInterval: rate.frameInterval) {
                ring.finishRead(lease)
                state.withStats { $0.congestionSkipped += 1 }
                continue
            }
            let keyframe = state.keyframeWanted.exchange(false, ordering: .relaxed)
            if keyframe { chain.requestKeyframe() }
            var frame = lease.frame
            // A still picture is refined with a longer rate buffer; a large change, a key frame
            // or a change not known gets the one-frame buffer (StillRefinement).
            let mode = still.frame(changedShare: refineStill ? StillRefinement.changedShare(frame.damage, size: frame.size) : nil,
                                   keyframe: keyframe, now: clock.now())
            let bufferFrames = still.bufferFrames(mode)
            if chain.rateBufferFrames != bufferFrames {
                do { try chain.setRateBuffer(frames: bufferFrames) } catch {
                    log.write(LogLine(.warning, "rate_buffer_failed", [("frames", bufferFrames), ("error", "\(error)")]))
                }
            }
            var pixels = UnsafeRawPointer(lease.slot.bytes)
            if let scaler, let scaled {
                let t0 = clock.now()
                scaler.scale(pixels, srcStride: frame.stride, into: scaled.bytes, dstStride: target.width * 4)
                let took = clock.now() - t0
                state.withStats { $0.scale.record(took) }
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
                try faults.failEncodeIfDue(state, clock: clock)
                let au = try chain.encode(pixels: pixels, frame: frame, pixelsRead: releaseSlot)
                releaseSlot()
                // A picture of the codec the peer no longer expects (setCodec came meanwhile) is dropped.
                guard let au, encoding == state.format else { continue }
                rate.recordOutput(bytes: au.bytes.count, now: clock.now())
                still.encoded(bytes: au.bytes.count, budgetBytes: chain.config.bitrate / 8 / max(1, chain.config.frameRate),
                              mode: mode)
                state.stillRefining.store(still.active, ordering: .relaxed)
                gate.recordEncode(chain.lastConvertTime + chain.lastEncodeTime)
                let age = clock.now() - au.pts
                state.withStats { stats in
                    stats.convert.record(chain.lastConvertTime)
                    stats.encode.record(chain.lastEncodeTime)
                    stats.captureToEncoded.record(age)
                    stats.encoded += 1
                    stats.lastFrameAt = clock.now()
                    if stats.firstFrameAt == nil { stats.firstFrameAt = stats.lastFrameAt }
                    if au.isKeyframe { stats.keyframes += 1 }
                    if mode == .refining { stats.refined += 1 }
                    stats.encoder = chain.current.map { "\($0.kind.rawValue)" } ?? "-"
                }
                state.callback(\.sink)?(au.bytes, au.pts)
            } catch {
                releaseSlot()
                log.write(LogLine(.error, "encode_failed", [("error", "\(error)")]))
                state.mediaFailed("encoding failed: \((error as? CastError)?.message ?? "\(error)")")
                return
            }
        }
    }
}
