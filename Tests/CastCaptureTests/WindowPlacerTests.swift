import Testing
import CastMedia
@testable import CastCapture

/// A shared window's picture drawn into ring slots: bars cleared only when a slot's placement
/// changes, the picture copied or shrunk into exactly its placement.
struct WindowPlacerTests {
    /// A frame of packed 32-bit pixels with padded rows, as a slot holds it.
    struct Picture {
        let size: FrameSize
        let stride: Int
        var bytes: [UInt8]

        init(_ size: FrameSize, padding: Int = 8, fill: UInt8 = 0xAA) {
            self.size = size
            stride = size.width * 4 + padding
            bytes = Array(repeating: fill, count: stride * size.height)
        }

        /// Each pixel's own value: (x, y, salt, 0xff).
        static func numbered(_ size: FrameSize, salt: UInt8 = 0) -> Picture {
            var p = Picture(size, padding: 12, fill: 0)
            for y in 0..<size.height {
                for x in 0..<size.width { p[x, y] = [UInt8(x), UInt8(y), salt, 0xff] }
            }
            return p
        }

        subscript(x: Int, y: Int) -> [UInt8] {
            get { Array(bytes[(y * stride + x * 4)..<(y * stride + x * 4 + 4)]) }
            set { bytes.replaceSubrange((y * stride + x * 4)..<(y * stride + x * 4 + 4), with: newValue) }
        }

        /// The pixels outside `rect`, as (x, y, pixel).
        func outside(_ rect: FrameRect) -> [(Int, Int, [UInt8])] {
            var out: [(Int, Int, [UInt8])] = []
            for y in 0..<size.height {
                for x in 0..<size.width where !(x >= rect.x && x < rect.x + rect.width && y >= rect.y && y < rect.y + rect.height) {
                    out.append((x, y, self[x, y]))
                }
            }
            return out
        }

        /// The pixels inside `rect`, row by row, relative to its corner.
        func inside(_ rect: FrameRect) -> [[UInt8]] {
            var out: [[UInt8]] = []
            for y in 0..<rect.height { for x in 0..<rect.width { out.append(self[rect.x + x, rect.y + y]) } }
            return out
        }

        /// Every pixel, row by row.
        var pixels: [[UInt8]] { inside(FrameRect(x: 0, y: 0, width: size.width, height: size.height)) }
    }

    let frame = FrameSize(width: 10, height: 8)
    let black: [UInt8] = [0, 0, 0, 0]
    let marker: [UInt8] = [1, 2, 3, 4]

    func place(_ placer: inout WindowPlacer, _ src: Picture, into dst: inout Picture, at placement: FrameRect, slot: Int) {
        src.bytes.withUnsafeBytes { s in
            dst.bytes.withUnsafeMutableBytes { d in
                placer.place(s.baseAddress!, stride: src.stride, size: src.size, into: d.baseAddress!, stride: dst.stride,
                             frame: dst.size, at: placement, slot: slot)
            }
        }
    }

    @Test func theFirstPlacementClearsTheBarsAndCopiesThePicture() {
        var placer = WindowPlacer()
        let window = Picture.numbered(FrameSize(width: 4, height: 3))
        var slot = Picture(frame)
        let at = FrameRect(x: 3, y: 2, width: 4, height: 3)
        place(&placer, window, into: &slot, at: at, slot: 0)
        #expect(slot.outside(at).allSatisfy { $0.2 == black })
        #expect(slot.inside(at) == window.pixels)
    }

    @Test func theSamePlacementInTheSameSlotLeavesTheBarsAlone() {
        var placer = WindowPlacer()
        var slot = Picture(frame)
        let at = FrameRect(x: 3, y: 2, width: 4, height: 3)
        place(&placer, Picture.numbered(at.size, salt: 1), into: &slot, at: at, slot: 0)
        slot[0, 0] = marker
        slot[9, 7] = marker
        let next = Picture.numbered(at.size, salt: 2)
        place(&placer, next, into: &slot, at: at, slot: 0)
        #expect(slot[0, 0] == marker)
        #expect(slot[9, 7] == marker)
        #expect(slot.inside(at) == next.pixels)
    }

    @Test func aChangedPlacementClearsTheBars() {
        var placer = WindowPlacer()
        var slot = Picture(frame)
        let first = FrameRect(x: 3, y: 2, width: 4, height: 3)
        place(&placer, Picture.numbered(first.size), into: &slot, at: first, slot: 0)
        slot[0, 0] = marker
        let moved = FrameRect(x: 1, y: 1, width: 4, height: 3)
        let window = Picture.numbered(moved.size, salt: 3)
        place(&placer, window, into: &slot, at: moved, slot: 0)
        // The old picture's pixels outside the new placement are black too.
        #expect(slot.outside(moved).allSatisfy { $0.2 == black })
        #expect(slot.inside(moved) == window.pixels)
    }

    @Test func aScaledPictureFillsExactlyItsPlacement() {
        var placer = WindowPlacer()
        let window = Picture.numbered(FrameSize(width: 8, height: 6), salt: 5)
        var slot = Picture(frame)
        let at = FrameRect(x: 3, y: 1, width: 4, height: 3)
        place(&placer, window, into: &slot, at: at, slot: 0)
        #expect(slot.outside(at).allSatisfy { $0.2 == black })
        // What the scaler makes of the picture on its own, in a frame of the placement's size.
        var shrunk = Picture(at.size, padding: 0, fill: 0)
        window.bytes.withUnsafeBytes { s in
            shrunk.bytes.withUnsafeMutableBytes { d in
                Scaler(from: window.size, to: at.size).scale(s.baseAddress!, srcStride: window.stride,
                                                             into: d.baseAddress!, dstStride: shrunk.stride)
            }
        }
        #expect(slot.inside(at) == shrunk.pixels)
        // A 2:1 box of (x, y) pixels: the corner one is the average of x 0...1 and y 0...1.
        #expect(slot[3, 1] == [1, 1, 5, 0xff])
        // Another size into the same placement: a new scaler, same rect.
        let wider = Picture.numbered(FrameSize(width: 4, height: 6), salt: 6)
        place(&placer, wider, into: &slot, at: at, slot: 0)
        #expect(slot[3, 1] == [0, 1, 6, 0xff])
        #expect(slot.outside(at).allSatisfy { $0.2 == black })
    }

    @Test func eachSlotKeepsItsOwnPlacement() {
        var placer = WindowPlacer()
        let at = FrameRect(x: 3, y: 2, width: 4, height: 3)
        let window = Picture.numbered(at.size)
        var zero = Picture(frame), one = Picture(frame)
        place(&placer, window, into: &zero, at: at, slot: 0)
        zero[0, 0] = marker
        one[0, 0] = marker
        // Slot 1 never held this placement: its bars are cleared, slot 0's are not.
        place(&placer, window, into: &one, at: at, slot: 1)
        place(&placer, window, into: &zero, at: at, slot: 0)
        #expect(one[0, 0] == black)
        #expect(zero[0, 0] == marker)
        // Slot 1 moves; slot 0 still holds the first placement.
        place(&placer, window, into: &one, at: FrameRect(x: 0, y: 0, width: 4, height: 3), slot: 1)
        place(&placer, window, into: &zero, at: at, slot: 0)
        #expect(zero[0, 0] == marker)
    }

    @Test func aNotedSlotIsClearedOnlyWhenItHeldAnotherPlacement() {
        var placer = WindowPlacer()
        let at = FrameRect(x: 3, y: 2, width: 4, height: 3)
        let window = Picture.numbered(at.size)
        // The caller drew the slot itself with this placement: bars stay.
        var slot = Picture(frame)
        slot[0, 0] = marker
        placer.note(slot: 0, holds: at)
        place(&placer, window, into: &slot, at: at, slot: 0)
        #expect(slot[0, 0] == marker)
        // A slate (an empty rect) since: bars cleared.
        placer.note(slot: 0, holds: FrameRect(x: 0, y: 0, width: 0, height: 0))
        place(&placer, window, into: &slot, at: at, slot: 0)
        #expect(slot[0, 0] == black)
        #expect(slot.inside(at) == window.pixels)
    }
}
