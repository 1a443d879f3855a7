import Testing
@testable import CastMedia

/// Issue 31: a shared window that changes size is drawn into a steady frame.
struct FrameFitTests {
    let frame = FrameSize(width: 640, height: 480)

    @Test func theSameSizeFillsTheFrame() {
        #expect(frame.fitted(into: frame) == FrameRect(x: 0, y: 0, width: 640, height: 480))
    }

    @Test func aWiderWindowIsShrunkToTheWidthWithBarsAboveAndBelow() {
        // 16:9 in 4:3: letterbox, aspect kept (640/360 = 1280/720).
        #expect(FrameSize(width: 1280, height: 720).fitted(into: frame) == FrameRect(x: 0, y: 60, width: 640, height: 360))
    }

    @Test func aTallerWindowIsShrunkToTheHeightWithBarsLeftAndRight() {
        // 1:2 in 4:3: pillarbox.
        #expect(FrameSize(width: 300, height: 600).fitted(into: frame) == FrameRect(x: 200, y: 0, width: 240, height: 480))
    }

    @Test func aSmallerWindowIsCentredAndNeverGrown() {
        #expect(FrameSize(width: 320, height: 240).fitted(into: frame) == FrameRect(x: 160, y: 120, width: 320, height: 240))
        // Only one side too big: shrunk by that side alone.
        #expect(FrameSize(width: 1280, height: 100).fitted(into: frame) == FrameRect(x: 0, y: 215, width: 640, height: 50))
    }

    @Test func aDegenerateWindowStillGetsAPixel() {
        let r = FrameSize(width: 10_000, height: 1).fitted(into: frame)
        #expect(r.width == 640 && r.height == 1)
    }

    @Test func damageIsMappedIntoThePlacementAndGrownToWholePixels() {
        let place = FrameRect(x: 0, y: 60, width: 640, height: 360)
        let window = FrameSize(width: 1280, height: 720)
        // Halved: 100x50+10+10 covers 5..55 × 5..30, shifted down by the bar.
        #expect(FrameRect(x: 10, y: 10, width: 100, height: 50).mapped(from: window, to: place)
                == FrameRect(x: 5, y: 65, width: 50, height: 25))
        // An odd pixel is grown outward, never lost.
        #expect(FrameRect(x: 3, y: 3, width: 1, height: 1).mapped(from: window, to: place)
                == FrameRect(x: 1, y: 61, width: 1, height: 1))
        // Clipped to the placement.
        #expect(FrameRect(x: 1270, y: 0, width: 100, height: 10).mapped(from: window, to: place)
                == FrameRect(x: 635, y: 60, width: 5, height: 5))
    }
}
