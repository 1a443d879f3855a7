import Testing
import CastMedia

/// Deterministic pseudo-random bytes (xorshift), so failures reproduce.
func patternBytes(_ count: Int, seed: UInt32) -> MemorySlot {
    let slot = MemorySlot(capacity: count)
    var s = seed | 1
    for i in 0..<count {
        s ^= s << 13; s ^= s >> 17; s ^= s << 5
        slot.bytes.storeBytes(of: UInt8(truncatingIfNeeded: s), toByteOffset: i, as: UInt8.self)
    }
    return slot
}

func fill(_ slot: MemorySlot, size: FrameSize, stride: Int, bgrx: (Int, Int) -> (UInt8, UInt8, UInt8)) {
    for y in 0..<size.height {
        for x in 0..<size.width {
            let (r, g, b) = bgrx(x, y)
            let o = y * stride + 4 * x
            slot.bytes.storeBytes(of: b, toByteOffset: o, as: UInt8.self)
            slot.bytes.storeBytes(of: g, toByteOffset: o + 1, as: UInt8.self)
            slot.bytes.storeBytes(of: r, toByteOffset: o + 2, as: UInt8.self)
            slot.bytes.storeBytes(of: 0xff, toByteOffset: o + 3, as: UInt8.self)
        }
    }
}

@Suite struct PixelConverterTests {
    @Test(arguments: [PixelFormat.bgrx, .rgbx], [PixelFormat.i420, .nv12])
    func simdMatchesTheFloatingPointReferenceWithinOne(src: PixelFormat, dst: PixelFormat) {
        // 50 = three SIMD steps + a 2-pixel tail; the stride has padding the converter must skip.
        for (w, h) in [(50, 6), (16, 2), (2, 2), (130, 4)] {
            let size = FrameSize(width: w, height: h)
            let stride = 4 * w + 12
            let slot = patternBytes(stride * h, seed: UInt32(w * 31 + h))
            let fast = PlanarImage(format: dst, size: size)
            let reference = PlanarImage(format: dst, size: size)
            PixelConverter.convert(from: slot.bytes, format: src, size: size, stride: stride, to: fast)
            PixelConverter.convertReference(from: slot.bytes, format: src, size: size, stride: stride, to: reference)
            let a = fast.packedBytes(), b = reference.packedBytes()
            #expect(a.count == w * h * 3 / 2)
            let maxError = zip(a, b).map { abs(Int($0) - Int($1)) }.max()!
            #expect(maxError <= 1, "\(src)→\(dst) at \(size): max error \(maxError)")
        }
    }

    @Test func primariesLandOnTheBT709LimitedRangeValues() {
        // BT.709 limited range: white (235,128,128), black (16,128,128),
        // red: Y = 16 + 219·0.2126 = 62.6, Cb = 128 − 112·0.2126/0.9278 = 102.3, Cr = 240;
        // blue: Y = 16 + 219·0.0722 = 31.8, Cb = 240, Cr = 128 − 112·0.0722/0.7874 = 117.7.
        let cases: [((UInt8, UInt8, UInt8), (UInt8, UInt8, UInt8))] = [
            ((255, 255, 255), (235, 128, 128)),
            ((0, 0, 0), (16, 128, 128)),
            ((255, 0, 0), (63, 102, 240)),
            ((0, 0, 255), (32, 240, 118)),
            ((128, 128, 128), (126, 128, 128)),
        ]
        for (rgb, yuv) in cases {
            // 18 wide: one SIMD step plus a scalar tail, both must agree.
            let size = FrameSize(width: 18, height: 2)
            let slot = MemorySlot(capacity: 18 * 4 * 2)
            fill(slot, size: size, stride: 72) { _, _ in rgb }
            let img = PlanarImage(format: .i420, size: size)
            PixelConverter.convert(from: slot.bytes, format: .bgrx, size: size, stride: 72, to: img)
            let bytes = img.packedBytes()
            #expect(Set(bytes[0..<36]) == [yuv.0], "Y of \(rgb)")
            #expect(Set(bytes[36..<45]) == [yuv.1], "Cb of \(rgb)")
            #expect(Set(bytes[45..<54]) == [yuv.2], "Cr of \(rgb)")
            #expect(BT709.reference(r: Double(rgb.0), g: Double(rgb.1), b: Double(rgb.2)) == yuv)
        }
    }

    @Test func rgbxIsBgrxWithRedAndBlueSwapped() {
        let size = FrameSize(width: 16, height: 2)
        let slot = MemorySlot(capacity: 128)
        fill(slot, size: size, stride: 64) { _, _ in (255, 0, 0) }  // BGRx red = RGBx blue
        let img = PlanarImage(format: .nv12, size: size)
        PixelConverter.convert(from: slot.bytes, format: .rgbx, size: size, stride: 64, to: img)
        let bytes = img.packedBytes()
        #expect(Set(bytes[0..<32]) == [32])
        #expect(Array(bytes[32..<34]) == [240, 118])  // NV12: Cb then Cr
    }

    @Test func chromaIsTheAverageOfEachTwoByTwoBlock() {
        // Left column white, right column black: each 2×2 block averages to grey 127.5.
        let size = FrameSize(width: 16, height: 2)
        let slot = MemorySlot(capacity: 128)
        fill(slot, size: size, stride: 64) { x, _ in x % 2 == 0 ? (255, 255, 255) : (0, 0, 0) }
        let img = PlanarImage(format: .i420, size: size)
        PixelConverter.convert(from: slot.bytes, format: .bgrx, size: size, stride: 64, to: img)
        let bytes = img.packedBytes()
        #expect(Array(bytes[0..<4]) == [235, 16, 235, 16])
        #expect(Set(bytes[32..<48]) == [128])
    }
}
