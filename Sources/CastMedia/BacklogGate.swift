import CastCore

/// Whether the encoder takes a captured frame or skips it because the pacer still
/// holds earlier media (docs/architecture.md: drop, never queue; a skipped frame's successor is
/// fresher). Pure: the caller passes the pacer's backlog (how long the media it holds
/// needs at the current pacing rate) and the frame interval.
///
/// The question is how long the new frame would wait behind earlier media, and it
/// is asked for the moment the frame would reach the pacer, one encode later: the
/// pacer drains meanwhile. A frame is skipped when that wait would exceed a frame
/// interval, or `burstAllowance` if that is longer.
///
/// Why an allowance: a frame far above the per-frame budget (a key frame, a scene cut:
/// the bench field's wrap, 137–204 KB against 16.7 KB a frame at 4 Mbit/s and 30 fps)
/// needs 110–160 ms at the pacing rate (2.5 × the target). Skipping for as long as it
/// is in the pacer cost 3–4 frames after every such frame: 2 fps on the bench field
/// to Firefox, whose average (3.9 Mbit/s at 30 fps) fits the cap. libwebrtc's pacer
/// skips nothing for its queue (its encoder-side frame dropper works on the average
/// rate). The allowance lets the frames after a burst wait up to 66 ms instead, while
/// a backlog that keeps growing (a frame rate the pacing rate cannot carry) is still
/// met by skipping; `RateLadder` lowers the frame rate for an output that stays over
/// the target.
public struct BacklogGate: Sendable {
    /// The longest wait a frame may have behind earlier media when it reaches the
    /// pacer, when that is longer than a frame interval.
    public var burstAllowance: Duration
    /// The encode time expected for the next frame: a moving average of recent ones.
    public private(set) var expectedEncode: Duration = .zero
    private var seen = false

    public init(burstAllowance: Duration = .milliseconds(66)) {
        self.burstAllowance = burstAllowance
    }

    /// An encode finished after `took`: the estimate moves an eighth of the way
    /// (the first one is taken as it is).
    public mutating func recordEncode(_ took: Duration) {
        guard took >= .zero else { return }
        if !seen {
            expectedEncode = took
            seen = true
        } else {
            expectedEncode = expectedEncode + (took - expectedEncode) / 8
        }
    }

    /// True when a frame captured now should be skipped.
    public func shouldSkip(backlog: Duration, frameInterval: Duration) -> Bool {
        let waitAtHandOver = backlog - expectedEncode
        return waitAtHandOver > max(frameInterval, burstAllowance)
    }
}
