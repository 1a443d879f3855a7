import CastCore
import CastEncode
import CastMedia

/// Issue 14: the congestion controller's target sets the encoder's bitrate and, below
/// thresholds, the frame rate (handed to the capture thread through
/// `PipelineState.wantedFrameRate`); the resolution stays (spec §7 maintainResolution).
/// Encode thread only.
struct RateAdaptation {
    private(set) var ladder: RateLadder
    private var output = OutputRate()
    private let config: EncoderConfig

    init(config: EncoderConfig) {
        self.config = config
        ladder = RateLadder(size: config.size, maxFrameRate: config.frameRate, maxBitrate: config.bitrate)
    }

    /// A new encoder chain starts at the caps: a fresh ladder applies the current target to it.
    mutating func chainReplaced() {
        ladder = RateLadder(size: config.size, maxFrameRate: config.frameRate, maxBitrate: config.bitrate)
    }

    /// One frame interval at the ladder's current frame rate.
    var frameInterval: Duration { .nanoseconds(1_000_000_000 / Int64(max(1, ladder.current.frameRate))) }

    mutating func recordOutput(bytes: Int, now: Instant) { output.record(bytes: bytes, now: now) }

    /// Feeds the latest target to the ladder and applies its decision to the encoder (and,
    /// through `wantedFrameRate`, to the capture thread).
    mutating func adapt(chain: EncoderChain, state: PipelineState, now: Instant, log: LogSink) {
        let target = state.targetBitrate.load(ordering: .relaxed)
        guard target > 0 else { return }
        guard let d = ladder.update(targetBitrate: target, outputBitrate: output.bitsPerSecond(now: now), now: now) else { return }
        let fpsChanged = d.frameRate != chain.config.frameRate
        do {
            try chain.setBitrate(d.bitrate)
            if fpsChanged { try chain.setFrameRate(d.frameRate) }
        } catch {
            log.write(LogLine(.warning, "rate_change_failed", [("bitrate", d.bitrate), ("fps", d.frameRate), ("error", "\(error)")]))
            return
        }
        state.wantedFrameRate.store(d.frameRate, ordering: .relaxed)
        state.withStats { stats in
            stats.targetBitrate = target
            stats.encoderBitrate = d.bitrate
            stats.frameRate = d.frameRate
        }
        if fpsChanged {
            log.write(LogLine(.info, "rate_change", [("target_kbps", target / 1000), ("encoder_kbps", d.bitrate / 1000),
                                                    ("fps", d.frameRate), ("size", "\(ladder.size)")]))
        }
    }
}
