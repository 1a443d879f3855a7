import CastCore
import CastMedia

/// What one capture attempt produced (Sunshine's capture outcomes: the
/// normal case that the screen changed size is an outcome, not an error).
public enum CaptureOutcome: Sendable {
    /// A new frame was published into the source's ring.
    case frame(Frame)
    /// The screen's size or format changed: close this source and open a new one at `size`.
    case reinit(size: FrameSize)
    /// No new frame this time: nothing changed, or every ring slot was busy
    /// (the ring counts that drop).
    case timeout
    /// The source was asked to stop.
    case interrupted
    /// The source cannot go on.
    case error(CastError)
    /// What was shared is gone for good (the shared window was closed, issue 31): the sentence
    /// says so. Not a failure to retry: the cast ends.
    case sourceEnded(String)
}

/// A screen source. Its ring's slots are the memory it captures into (no
/// extra copy); the encode side takes frames from the ring. One thread
/// calls `capture`; the source and its slots outlive every reader of the ring.
public protocol FrameSource: AnyObject {
    associatedtype Slot: FrameSlot
    var ring: FrameRing<Slot> { get }
    var format: PixelFormat { get }
    var size: FrameSize { get }
    /// Captures one frame into a free slot. With `onlyIfChanged`, returns
    /// `.timeout` without reading the screen when nothing changed.
    func capture(onlyIfChanged: Bool) -> CaptureOutcome
    /// Blocks until the source reports a change (XDamage, a PipeWire buffer; or something
    /// `capture` must report: a size change, a failure) or until `deadline`. True when there
    /// is something for `capture` (issue 19: capture when the screen changes, not on a tick).
    func waitForChange(until deadline: Instant) -> Bool
    /// Whether some changes raise no notification, so that the owner must look at the
    /// frame rate as well (the X11 cursor: a sprite XDamage does not see).
    var changesNeedProbing: Bool { get }
    /// Whether `waitForChange` answers once per change, so that the owner can keep listening
    /// while a change waits for the minimum interval and read the screen right after the newest
    /// (`CaptureScheduler`'s phase lock). False when it answers true for as long as a change is
    /// unread (a PipeWire buffer): asking again would spin.
    var notifiesEachChange: Bool { get }
}
