import Testing
import CastMedia

@Suite struct ScalerTests {
    func pixel(_ slot: MemorySlot, _ x: Int, _ y: Int, stride: Int) -> [UInt8] {
        (0..<4).map { slot.bytes.load(fromByteOffset: y * stride + 4 * x + $0, as: UInt8.self) }
    }

    @Test func sameSizeIsAnExactCopy() {
        let size = FrameSize(width: 37, height: 5)
        let src = patternBytes(37 * 4 * 5, seed: 7)
        let dst = MemorySlot(capacity: 37 * 4 * 5)
        Scaler(from: size, to: size).scale(src.bytes, srcStride: 148, into: dst.bytes, dstStride: 148)
        #expect(Array(UnsafeRawBufferPointer(start: src.bytes, count: 740)) ==
                Array(UnsafeRawBufferPointer(start: dst.bytes, count: 740)))
    }

    @Test func halvingAveragesEachTwoByTwoBlockRounded() {
        let src = MemorySlot(capacity: 4 * 4 * 2)
        // Block of channel values 0, 100, 200, 50 → 87.5 → 88; the second block 255s stay 255.
        let values: [[UInt8]] = [[0, 100, 255, 255], [200, 50, 255, 255]]
        for y in 0..<2 { for x in 0..<4 { for c in 0..<4 {
            src.bytes.storeBytes(of: values[y][x], toByteOffset: y * 16 + 4 * x + c, as: UInt8.self)
        } } }
        let dst = MemorySlot(capacity: 8)
        Scaler(from: FrameSize(width: 4, height: 2), to: FrameSize(width: 2, height: 1))
            .scale(src.bytes, srcStride: 16, into: dst.bytes, dstStride: 8)
        #expect(pixel(dst, 0, 0, stride: 8) == [88, 88, 88, 88])
        #expect(pixel(dst, 1, 0, stride: 8) == [255, 255, 255, 255])
    }

    @Test func flatColourStaysExactAtFourThirds() {
        // 2560×1440 → 1920×1080 on a slice (the filter is separable; 8 rows → 6).
        let w = 2560, h = 8
        let src = MemorySlot(capacity: w * 4 * h)
        fill(src, size: FrameSize(width: w, height: h), stride: w * 4) { _, _ in (12, 200, 99) }
        let dst = MemorySlot(capacity: 1920 * 4 * 6)
        Scaler(from: FrameSize(width: w, height: h), to: FrameSize(width: 1920, height: 6))
            .scale(src.bytes, srcStride: w * 4, into: dst.bytes, dstStride: 1920 * 4)
        for (x, y) in [(0, 0), (1, 1), (959, 3), (1919, 5)] {
            #expect(pixel(dst, x, y, stride: 1920 * 4) == [99, 200, 12, 255])
        }
    }

    @Test func fourThirdsBlendsAcrossASourceEdgeByOverlap() {
        // Source columns 0..3 = 0, 0, 0, 240 (one row); output 3 pixels each cover 4/3 source pixels.
        // Output 2 covers [8/3, 4): 1/3 of column 2 (0) and all of column 3 (240) → 240·(1/(4/3)) = 180.
        let src = MemorySlot(capacity: 16)
        for c in 0..<4 { src.bytes.storeBytes(of: UInt8(240), toByteOffset: 12 + c, as: UInt8.self) }
        let dst = MemorySlot(capacity: 12)
        Scaler(from: FrameSize(width: 4, height: 1), to: FrameSize(width: 3, height: 1))
            .scale(src.bytes, srcStride: 16, into: dst.bytes, dstStride: 12)
        #expect(pixel(dst, 0, 0, stride: 12) == [0, 0, 0, 0])
        #expect(pixel(dst, 1, 0, stride: 12) == [0, 0, 0, 0])
        #expect(pixel(dst, 2, 0, stride: 12) == [180, 180, 180, 180])
    }
}
