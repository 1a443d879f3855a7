import CastCore

/// A still screen becomes sharp: after a large change (a new slide, a page scrolled), the
/// encoder keeps refining the picture while the screen stands still or changes only a
/// little (a ticking clock, a blinking caret), and yields at once when a large change comes.
///
/// Two levers, both decided here, frame by frame:
///
/// - **The encoder's rate buffer.** castd's x264 runs CBR with a one-frame VBV buffer so
///   that no frame takes longer than a frame interval on the link. On a still picture that
///   buffer starves the refinement: measured with castd's x264 settings on a still 1080p
///   slide at 1 Mbit/s and 30 fps, the picture stopped at 37 dB PSNR-Y, each frame using a
///   quarter of its budget; with a three-frame buffer on the frames after the change it
///   reached 45 dB 1.0 s after the change and 53 dB by 3 s, no frame over its one-frame
///   budget (docs/quality.md, "A still screen becomes sharp"). A frame whose change is
///   large, or whose change is not known, is encoded with the one-frame buffer: a new
///   picture never waits behind a bigger allowance.
/// - **Frames to refine with.** On a screen that does not change at all the capture thread
///   reads it only for the refresh (every 900 ms), and each refresh refines once. While
///   `active`, the capture thread reads it at the frame rate instead
///   (`CaptureScheduler.Input.refining`), until the refinement is done: `convergedFrames`
///   refined frames in a row under `convergedShare` of a frame's budget (nothing left to
///   add), or `window` after the large change, whichever comes first.
///
/// Pure: time is what the owner passes in. The encode thread owns it.
public struct StillRefinement: Sendable {
    public struct Configuration: Sendable, Equatable {
        /// A change over at most this share of the picture is small.
        public var smallChange: Double
        /// Refining frames are read for at most this long after a large change.
        public var window: Duration
        /// Refinement is done after this many refined frames in a row came out under
        /// `convergedShare` of a frame's budget.
        public var convergedFrames: Int
        public var convergedShare: Double
        /// The encoder's rate buffer, in frames, while refining.
        public var refiningBufferFrames: Int

        public init(smallChange: Double = 0.05, window: Duration = .seconds(3), convergedFrames: Int = 3,
                    convergedShare: Double = 1.0 / 16, refiningBufferFrames: Int = 3) {
            self.smallChange = smallChange
            self.window = window
            self.convergedFrames = convergedFrames
            self.convergedShare = convergedShare
            self.refiningBufferFrames = refiningBufferFrames
        }
    }

    /// How the next frame is encoded.
    public enum Mode: Equatable, Sendable {
        /// The one-frame rate buffer: a large change, a key frame, or a change not known.
        case tight
        /// The refining buffer (`refiningBufferFrames`): a small change or none.
        case refining
    }

    public let configuration: Configuration
    /// Whether the screen should be read at the frame rate to refine it.
    public private(set) var active = false
    private var lastLargeChange: Instant?
    private var quietFrames = 0

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// The rate buffer, in frames, that `mode` stands for.
    public func bufferFrames(_ mode: Mode) -> Int {
        mode == .refining ? configuration.refiningBufferFrames : 1
    }

    /// The mode for the frame about to be encoded. `changedShare`: the share of the picture
    /// its damage covers (0…1; nil when the source does not say); `keyframe`: it is to be a
    /// key frame (a whole picture: the one-frame buffer, like a large change).
    public mutating func frame(changedShare: Double?, keyframe: Bool, now: Instant) -> Mode {
        if let l = lastLargeChange, now - l > configuration.window { active = false }
        guard let share = changedShare else {
            // Without damage nothing says the screen stands still.
            active = false
            return .tight
        }
        if share > configuration.smallChange || keyframe {
            lastLargeChange = now
            active = true
            quietFrames = 0
            return .tight
        }
        return .refining
    }

    /// What the frame encoded in `mode` came to, against one frame's budget at the encoder's
    /// bitrate and frame rate.
    public mutating func encoded(bytes: Int, budgetBytes: Int, mode: Mode) {
        guard mode == .refining, active else { return }
        if Double(bytes) < Double(budgetBytes) * configuration.convergedShare {
            quietFrames += 1
            if quietFrames >= configuration.convergedFrames { active = false }
        } else {
            quietFrames = 0
        }
    }

    /// The share of a `size` picture that `damage` covers (rectangles may overlap: their areas
    /// are summed, at most 1), or nil when the damage is not known.
    public static func changedShare(_ damage: [FrameRect]?, size: FrameSize) -> Double? {
        guard let damage else { return nil }
        let area = Double(size.width) * Double(size.height)
        guard area > 0 else { return nil }
        let changed = damage.reduce(0.0) { $0 + Double(max(0, $1.width)) * Double(max(0, $1.height)) }
        return min(1, changed / area)
    }
}
