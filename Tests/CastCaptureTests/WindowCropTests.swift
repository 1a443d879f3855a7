import Testing
import CastMedia
@testable import CastCapture

/// Issue 31: a window's PipeWire stream cropped to the window, in a steady frame.
struct WindowCropTests {
    let stream = FrameSize(width: 1280, height: 720)

    @Test func theFirstCropChoosesTheFrameWithinTheCaps() {
        let c = WindowCrop(stream: stream, crop: FrameRect(x: 0, y: 0, width: 640, height: 360), caps: .default)
        #expect(c.frame == FrameSize(width: 640, height: 360))
        #expect(c.placement == FrameRect(x: 0, y: 0, width: 640, height: 360))
        #expect(!c.scaled)
        // Odd sides: the frame's are even, the crop shrunk a pixel into it.
        let odd = WindowCrop(stream: stream, crop: FrameRect(x: 10, y: 20, width: 641, height: 361), caps: .default)
        #expect(odd.frame == FrameSize(width: 640, height: 360))
        #expect(odd.scaled)
        // Larger than the caps: 720p caps shrink a 1280x720 crop of a 4K stream... and a 2560x1440 one.
        let big = WindowCrop(stream: FrameSize(width: 3840, height: 2160), crop: FrameRect(x: 0, y: 0, width: 2560, height: 1440),
                             caps: CaptureCaps.default.lowered(maxHeight: 720))
        #expect(big.frame == FrameSize(width: 1280, height: 720))
        #expect(big.placement == FrameRect(x: 0, y: 0, width: 1280, height: 720))
    }

    @Test func noCropOrNothingInsideIsTheWholeStream() {
        let whole = FrameRect(x: 0, y: 0, width: 1280, height: 720)
        #expect(WindowCrop.region(nil, in: stream) == whole)
        #expect(WindowCrop.region(FrameRect(x: 5, y: 5, width: 0, height: 10), in: stream) == whole)
        #expect(WindowCrop.region(FrameRect(x: 2000, y: 0, width: 10, height: 10), in: stream) == whole)
        // Partly outside: clipped.
        #expect(WindowCrop.region(FrameRect(x: -10, y: 700, width: 100, height: 100), in: stream)
                == FrameRect(x: 0, y: 700, width: 90, height: 20))
        // A monitor (no crop, or one equal to the stream): the stream as it is.
        let m = WindowCrop(stream: FrameSize(width: 1920, height: 1080), crop: nil, caps: .default)
        #expect(m.frame == FrameSize(width: 1920, height: 1080) && !m.scaled)
    }

    @Test func aLaterCropOfAnotherSizeIsFittedIntoTheSteadyFrame() {
        var c = WindowCrop(stream: stream, crop: FrameRect(x: 0, y: 0, width: 640, height: 360), caps: .default)
        var moved = c.update(crop: nil, stream: stream)   // a buffer without crop keeps the last
        #expect(!moved)
        moved = c.update(crop: FrameRect(x: 0, y: 0, width: 640, height: 360), stream: stream)
        #expect(!moved)
        // Taller: pillarbox, aspect kept.
        moved = c.update(crop: FrameRect(x: 0, y: 0, width: 400, height: 600), stream: stream)
        #expect(moved)
        #expect(c.frame == FrameSize(width: 640, height: 360))
        #expect(c.placement == FrameRect(x: 200, y: 0, width: 240, height: 360))
        #expect(c.scaled)
        // Smaller: centred, never grown.
        moved = c.update(crop: FrameRect(x: 100, y: 50, width: 320, height: 180), stream: stream)
        #expect(moved)
        #expect(c.placement == FrameRect(x: 160, y: 90, width: 320, height: 180))
        #expect(!c.scaled)
        // Moved, same size: a whole new picture, the same placement.
        moved = c.update(crop: FrameRect(x: 300, y: 50, width: 320, height: 180), stream: stream)
        #expect(moved)
        #expect(c.placement == FrameRect(x: 160, y: 90, width: 320, height: 180))
    }

    @Test func damageAndTheCursorAreInTheFramesCoordinates() {
        var c = WindowCrop(stream: stream, crop: FrameRect(x: 100, y: 50, width: 640, height: 360), caps: .default)
        #expect(c.damage(nil) == nil)
        #expect(c.damage([FrameRect(x: 110, y: 60, width: 20, height: 10), FrameRect(x: 0, y: 0, width: 50, height: 50)])
                == [FrameRect(x: 10, y: 10, width: 20, height: 10)])
        #expect(c.damage([FrameRect(x: 700, y: 400, width: 100, height: 100)]) == [FrameRect(x: 600, y: 350, width: 40, height: 10)])
        #expect(c.point(x: 100, y: 50) == (x: 0, y: 0))
        // Twice as large, into the 640x360 frame: halved.
        c.update(crop: FrameRect(x: 0, y: 0, width: 1280, height: 720), stream: stream)
        #expect(c.damage([FrameRect(x: 100, y: 100, width: 20, height: 20)]) == [FrameRect(x: 50, y: 50, width: 10, height: 10)])
        #expect(c.point(x: 640, y: 360) == (x: 320, y: 180))
    }
}
