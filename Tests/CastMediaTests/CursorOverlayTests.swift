import Testing
import CastMedia

@Suite struct CursorOverlayTests {
    func px(_ s: MemorySlot, _ x: Int, _ y: Int, stride: Int) -> [UInt8] {
        (0..<4).map { s.bytes.load(fromByteOffset: y * stride + 4 * x + $0, as: UInt8.self) }
    }

    @Test func premultipliedOverBlendsAndTransparentPixelsLeaveTheFrame() {
        let size = FrameSize(width: 4, height: 2)
        let slot = MemorySlot(capacity: 32)
        fill(slot, size: size, stride: 16) { _, _ in (200, 100, 50) }
        // Opaque red; half-transparent white (premultiplied: 0x80 in every channel); fully transparent.
        let cursor = CursorOverlay(x: 1, y: 0, width: 3, height: 1, pixels: [0xffff_0000, 0x8080_8080, 0x0000_0000])
        cursor.draw(onto: slot.bytes, format: .bgrx, size: size, stride: 16)
        #expect(px(slot, 0, 0, stride: 16) == [50, 100, 200, 255])  // untouched
        #expect(px(slot, 1, 0, stride: 16) == [0, 0, 255, 255])    // BGRx red
        // 128 + d·127/255: B 50 → 153, G 100 → 178, R 200 → 228.
        #expect(px(slot, 2, 0, stride: 16) == [153, 178, 228, 255])
        #expect(px(slot, 3, 0, stride: 16) == [50, 100, 200, 255])
        #expect(px(slot, 1, 1, stride: 16) == [50, 100, 200, 255])
    }

    @Test func cursorHangingOffTheTopLeftIsClipped() {
        let size = FrameSize(width: 2, height: 2)
        let slot = MemorySlot(capacity: 16)
        let cursor = CursorOverlay(x: -1, y: -1, width: 2, height: 2, pixels: [0xff00_00ff, 0xff00_00ff, 0xff00_00ff, 0xff00_ff00])
        cursor.draw(onto: slot.bytes, format: .rgbx, size: size, stride: 8)
        #expect(px(slot, 0, 0, stride: 8) == [0, 255, 0, 0])  // only the bottom-right cursor pixel lands (RGBx green)
        #expect(px(slot, 1, 0, stride: 8) == [0, 0, 0, 0])
        #expect(px(slot, 0, 1, stride: 8) == [0, 0, 0, 0])
    }
}
