import CastCore
import CastMedia

extension CapturePipeline {
    /// What a cast's media did: counts, the encoder and its rates, and the stage times
    /// (`castd status`, the periodic `stats` line, the watchdog's progress signal).
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
        /// Frames encoded with the refining rate buffer (a still picture sharpened: `StillRefinement`).
        public var refined: UInt64 = 0
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

        /// The stage summaries of the window since the last call, as key=value log fields
        /// ("p50/p95/max" in ms); the window starts afresh.
        mutating func drainStageTimes() -> [(String, String)] {
            let stages: [(String, WritableKeyPath<Statistics, StageTimes>)] = [
                ("capture_ms", \.capture), ("scale_ms", \.scale), ("convert_ms", \.convert),
                ("encode_ms", \.encode), ("capture_to_encoded_ms", \.captureToEncoded)]
            return stages.compactMap { name, path in self[keyPath: path].drain().map { (name, $0.milliseconds) } }
        }

        /// A capture source's ring is done with: its counts join those of the ended ones.
        mutating func ringEnded(_ ring: FrameRingStats) {
            endedRingDropped += ring.dropped
            endedRingSkipped += ring.skipped
            currentRing = FrameRingStats()
        }
    }
}
