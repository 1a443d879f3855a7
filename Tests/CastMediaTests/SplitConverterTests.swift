import Testing
import CastMedia

@Suite struct SplitConverterTests {
    /// Two threads, two halves: the same bytes as one thread converting the whole frame, for
    /// both layouts and both matrices, an odd number of row pairs, and frames small enough to
    /// stay on one thread; the converter is reused frame after frame.
    @Test(arguments: [PixelFormat.i420, .nv12])
    func twoHalvesGiveTheBytesOfOneWholeConversion(dst: PixelFormat) {
        let split = SplitConverter(name: "castd-test-cvt")
        defer { split.stop() }
        for (w, h, seed) in [(1920, 1080, 1), (1298, 262, 2), (50, 6, 3), (640, 130, 4), (640, 256, 5)] {
            let size = FrameSize(width: w, height: h)
            let stride = 4 * w + 64
            let slot = patternBytes(stride * h, seed: UInt32(seed))
            for matrix in [YCbCrMatrix.bt709, .bt601] {
                let one = PlanarImage(format: dst, size: size)
                let two = PlanarImage(format: dst, size: size)
                PixelConverter.convert(from: slot.bytes, format: .bgrx, size: size, stride: stride, to: one, matrix: matrix)
                split.convert(from: slot.bytes, format: .bgrx, size: size, stride: stride, to: two, matrix: matrix)
                #expect(one.packedBytes() == two.packedBytes(), "\(dst) \(size) \(matrix)")
            }
        }
    }

    @Test func rowPairRangesWriteOnlyTheirOwnRows() {
        let size = FrameSize(width: 64, height: 8)
        let stride = 4 * 64
        let slot = patternBytes(stride * 8, seed: 9)
        let whole = PlanarImage(format: .i420, size: size)
        PixelConverter.convert(from: slot.bytes, format: .bgrx, size: size, stride: stride, to: whole)
        let part = PlanarImage(format: .i420, size: size)
        part.bytes.initializeMemory(as: UInt8.self, repeating: 0xAB, count: part.byteCount)
        PixelConverter.convert(from: slot.bytes, format: .bgrx, size: size, stride: stride, to: part, matrix: .bt709,
                               pairs: 1..<3)
        // Luma rows 2 to 5 and chroma rows 1 and 2 converted; everything else untouched.
        for y in 0..<8 {
            let row = (0..<64).map { part.plane(0)[y * part.strides[0] + $0] }
            let want = (2..<6).contains(y) ? (0..<64).map { whole.plane(0)[y * whole.strides[0] + $0] }
                                           : Array(repeating: UInt8(0xAB), count: 64)
            #expect(row == want, "luma row \(y)")
        }
        for cy in 0..<4 {
            let row = (0..<32).map { part.plane(1)[cy * part.strides[1] + $0] }
            let want = (1..<3).contains(cy) ? (0..<32).map { whole.plane(1)[cy * whole.strides[1] + $0] }
                                            : Array(repeating: UInt8(0xAB), count: 32)
            #expect(row == want, "chroma row \(cy)")
        }
    }
}
