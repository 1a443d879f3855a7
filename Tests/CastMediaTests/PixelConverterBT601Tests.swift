import Testing
@testable import CastMedia

/// VP8 is converted with BT.601 (issue 15): the fixed-point matrix matches the formula.
@Suite struct PixelConverterBT601Tests {
    @Test func bt709CoefficientsAreTheDocumentedOnes() {
        let m = YCbCrMatrix.bt709
        #expect([m.yR, m.yG, m.yB] == [47, 157, 16])
    }

    @Test func bt601GivesTheBT601ValuesForPrimariesAndKeepsGreyAndWhite() {
        let m = YCbCrMatrix.bt601
        #expect([m.yR, m.yG, m.yB] == [66, 129, 25])
        // BT.601 limited range: Y' = 16 + 219·(0.299 R + 0.587 G + 0.114 B)/255.
        #expect(m.lumaFixed(r: 191, g: 0, b: 0) == 65)      // 16 + 219·0.299·191/255 = 65.05
        #expect(m.lumaFixed(r: 0, g: 191, b: 0) == 112)     // 16 + 96.3
        #expect(m.lumaFixed(r: 255, g: 255, b: 255) == 235)
        #expect(m.chromaFixed(rs: 4 * 128, gs: 4 * 128, bs: 4 * 128) == (128, 128))
        // Pure blue: Cb = 128 + 224·0.5·191/255 = 211.9 → 212 (the same in BT.709: Cb's B weight is 0.5 in both).
        #expect(m.chromaFixed(rs: 0, gs: 0, bs: 4 * 191).cb == 212)
        // Pure red: Cr = 128 + 112·191/255 = 211.9; green's Cr differs between the matrices.
        #expect(m.chromaFixed(rs: 4 * 191, gs: 0, bs: 0).cr == 212)
        #expect(m.chromaFixed(rs: 0, gs: 4 * 191, bs: 0).cr != YCbCrMatrix.bt709.chromaFixed(rs: 0, gs: 4 * 191, bs: 0).cr)
    }

    @Test func theConverterWritesTheChosenMatrix() {
        let size = FrameSize(width: 16, height: 2)
        var pixels = [UInt32](repeating: 0x0000_bf00, count: 32)   // BGRx green 191
        let a = PlanarImage(format: .i420, size: size), b = PlanarImage(format: .i420, size: size)
        pixels.withUnsafeMutableBytes { p in
            PixelConverter.convert(from: p.baseAddress!, format: .bgrx, size: size, stride: 64, to: a)
            PixelConverter.convert(from: p.baseAddress!, format: .bgrx, size: size, stride: 64, to: b, matrix: .bt601)
        }
        #expect(a.plane(0)[0] == YCbCrMatrix.bt709.lumaFixed(r: 0, g: 191, b: 0))
        #expect(b.plane(0)[0] == YCbCrMatrix.bt601.lumaFixed(r: 0, g: 191, b: 0))
        #expect(a.plane(0)[0] != b.plane(0)[0])
    }
}
