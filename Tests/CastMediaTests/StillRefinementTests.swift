import Testing
import CastCore
import CastMedia

/// The refinement trigger on a fake clock: when the encoder refines, when it stops, and that
/// a large change always gets the one-frame buffer at once.
@Suite struct StillRefinementTests {
    let t0 = Instant(nanoseconds: 1_000_000_000)
    let frame = Duration.nanoseconds(33_333_333)
    /// One frame's budget at 1 Mbit/s and 30 fps.
    let budget = 1_000_000 / 8 / 30

    @Test func aLargeChangeIsEncodedTightThenTheStillFramesAfterItRefine() {
        var r = StillRefinement()
        #expect(!r.active)
        #expect(r.frame(changedShare: 1, keyframe: false, now: t0) == .tight)
        #expect(r.active)
        r.encoded(bytes: budget, budgetBytes: budget, mode: .tight)
        // Nothing changed (a refining read) and a caret's blink: both refine.
        #expect(r.frame(changedShare: 0, keyframe: false, now: t0 + frame) == .refining)
        #expect(r.frame(changedShare: 0.001, keyframe: false, now: t0 + frame * 2) == .refining)
        #expect(r.bufferFrames(.refining) == 3)
        #expect(r.bufferFrames(.tight) == 1)
        #expect(r.active)
    }

    @Test func aLargeChangeWhileRefiningYieldsAtOnce() {
        var r = StillRefinement()
        _ = r.frame(changedShare: 1, keyframe: false, now: t0)
        #expect(r.frame(changedShare: 0, keyframe: false, now: t0 + frame) == .refining)
        // The next slide: the one-frame buffer for that very frame, not the one after.
        #expect(r.frame(changedShare: 0.6, keyframe: false, now: t0 + frame * 2) == .tight)
        // Just over the small-change share is large; at it, small.
        #expect(r.frame(changedShare: 0.0501, keyframe: false, now: t0 + frame * 3) == .tight)
        #expect(r.frame(changedShare: 0.05, keyframe: false, now: t0 + frame * 4) == .refining)
    }

    @Test func aKeyFrameIsAlwaysTight() {
        var r = StillRefinement()
        #expect(r.frame(changedShare: 0, keyframe: true, now: t0) == .tight)
        #expect(r.active)   // a key frame is a whole new picture to refine after
    }

    @Test func unknownDamageNeverRefines() {
        var r = StillRefinement()
        _ = r.frame(changedShare: 1, keyframe: false, now: t0)
        #expect(r.active)
        #expect(r.frame(changedShare: nil, keyframe: false, now: t0 + frame) == .tight)
        #expect(!r.active)
        #expect(StillRefinement.changedShare(nil, size: FrameSize(width: 1920, height: 1080)) == nil)
    }

    @Test func refinementEndsWhenThreeFramesInARowAddAlmostNothing() {
        var r = StillRefinement()
        _ = r.frame(changedShare: 1, keyframe: false, now: t0)
        var t = t0
        func still(_ bytes: Int) {
            t = t + frame
            let m = r.frame(changedShare: 0, keyframe: false, now: t)
            r.encoded(bytes: bytes, budgetBytes: budget, mode: m)
        }
        still(budget / 2)          // still sharpening
        still(budget / 20)         // under 1/16 of the budget: quiet 1
        still(budget / 20)         // quiet 2
        still(budget / 4)          // a frame that added something: the count starts again
        #expect(r.active)
        still(budget / 20)
        still(budget / 20)
        #expect(r.active)
        still(budget / 20)         // three quiet frames in a row
        #expect(!r.active)
        // Tight frames never count as converged: a run of small tight frames does not end it.
        var s = StillRefinement()
        _ = s.frame(changedShare: 1, keyframe: false, now: t0)
        for _ in 0..<5 { s.encoded(bytes: 1, budgetBytes: budget, mode: .tight) }
        #expect(s.active)
    }

    @Test func refinementEndsAtTheWindowEvenIfFramesStillAddBits() {
        var r = StillRefinement()
        _ = r.frame(changedShare: 1, keyframe: false, now: t0)
        var t = t0
        while t - t0 < .seconds(3) {
            t = t + frame
            let m = r.frame(changedShare: 0, keyframe: false, now: t)
            r.encoded(bytes: budget, budgetBytes: budget, mode: m)
            if t - t0 <= .seconds(3) { #expect(r.active) }
        }
        _ = r.frame(changedShare: 0, keyframe: false, now: t0 + .seconds(3) + .milliseconds(1))
        #expect(!r.active)
        // Still frames after the window keep the refining buffer (a caret's blink stays cheap),
        // but nothing asks for frames at the frame rate any more.
        #expect(r.frame(changedShare: 0.001, keyframe: false, now: t0 + .seconds(4)) == .refining)
        #expect(!r.active)
    }

    @Test func changedShareSumsTheRectanglesAtMostTheWholePicture() {
        let size = FrameSize(width: 100, height: 100)
        #expect(StillRefinement.changedShare([], size: size) == 0)
        #expect(StillRefinement.changedShare([FrameRect(x: 0, y: 0, width: 10, height: 10)], size: size) == 0.01)
        let twice = [FrameRect(x: 0, y: 0, width: 100, height: 100), FrameRect(x: 0, y: 0, width: 50, height: 50)]
        #expect(StillRefinement.changedShare(twice, size: size) == 1)
        #expect(StillRefinement.changedShare([FrameRect(x: 0, y: 0, width: -5, height: 10)], size: size) == 0)
    }
}
