/// Packed BGRx/RGBx → I420/NV12 at BT.709 limited range, two rows at a time
/// (one chroma row per pair, 4:2:0 with each chroma sample the average of its
/// 2×2 block). 16 pixels per step with Swift SIMD types; the remainder of a
/// row uses the same fixed-point arithmetic in scalar code, so results do not
/// depend on the width. `convertReference` is the floating-point formula the
/// tests hold it to (|difference| ≤ 1).
public enum PixelConverter {
    /// Converts `size` pixels of a packed frame into `dst` (which must have the same size),
    /// with BT.709's matrix (H.264, whose VUI says so) or BT.601's (VP8, whose decoders assume it).
    public static func convert(from src: UnsafeRawPointer, format: PixelFormat, size: FrameSize, stride: Int,
                               to dst: PlanarImage, matrix m: YCbCrMatrix = .bt709) {
        convert(from: src, format: format, size: size, stride: stride, to: dst, matrix: m, pairs: 0..<(size.height / 2))
    }

    /// The same for the row pairs `pairs` only (pair `k` is rows 2k and 2k+1 and chroma row
    /// k): disjoint ranges write disjoint bytes, so two threads may convert one frame.
    @_optimize(speed)
    public static func convert(from src: UnsafeRawPointer, format: PixelFormat, size: FrameSize, stride: Int,
                               to dst: PlanarImage, matrix m: YCbCrMatrix, pairs: Range<Int>) {
        precondition(format.isPacked, "convert reads BGRx or RGBx")
        precondition(dst.size == size, "destination is \(dst.size), source \(size)")
        precondition(pairs.lowerBound >= 0 && pairs.upperBound <= size.height / 2, "row pairs \(pairs) outside the frame")
        // Channel positions inside a little-endian 32-bit pixel.
        let (rShift, bShift): (UInt32, UInt32) = format == .bgrx ? (16, 0) : (0, 16)
        let w = size.width
        let yp = dst.plane(0)
        let ys = dst.strides[0]
        let nv12 = dst.format == .nv12
        let up = dst.plane(1)
        let us = dst.strides[1]
        let vp = nv12 ? up : dst.plane(2)
        for cy in pairs {
            let row0 = src + (2 * cy) * stride
            let row1 = row0 + stride
            let y0 = yp + (2 * cy) * ys
            let y1 = y0 + ys
            let uRow = up + cy * us
            let vRow = vp + cy * us
            var x = 0
            while x + 16 <= w {
                let p0 = row0.loadUnaligned(fromByteOffset: 4 * x, as: SIMD16<UInt32>.self)
                let p1 = row1.loadUnaligned(fromByteOffset: 4 * x, as: SIMD16<UInt32>.self)
                let r0 = channel(p0, rShift), g0 = channel(p0, 8), b0 = channel(p0, bShift)
                let r1 = channel(p1, rShift), g1 = channel(p1, 8), b1 = channel(p1, bShift)
                UnsafeMutableRawPointer(y0 + x).storeBytes(of: luma(r0, g0, b0, m), as: SIMD16<UInt8>.self)
                UnsafeMutableRawPointer(y1 + x).storeBytes(of: luma(r1, g1, b1, m), as: SIMD16<UInt8>.self)
                let rs = SIMD8<Int32>(truncatingIfNeeded: r0.evenHalf &+ r0.oddHalf &+ r1.evenHalf &+ r1.oddHalf)
                let gs = SIMD8<Int32>(truncatingIfNeeded: g0.evenHalf &+ g0.oddHalf &+ g1.evenHalf &+ g1.oddHalf)
                let bs = SIMD8<Int32>(truncatingIfNeeded: b0.evenHalf &+ b0.oddHalf &+ b1.evenHalf &+ b1.oddHalf)
                let bias = SIMD8<Int32>(repeating: (128 << 16) + (1 << 15))
                let cb = (m.cbR &* rs &+ m.cbG &* gs &+ m.cbB &* bs &+ bias) &>> 16
                let cr = (m.crR &* rs &+ m.crG &* gs &+ m.crB &* bs &+ bias) &>> 16
                let cb8 = SIMD8<UInt8>(truncatingIfNeeded: cb)
                let cr8 = SIMD8<UInt8>(truncatingIfNeeded: cr)
                if nv12 {
                    var uv = SIMD16<UInt8>()
                    uv.evenHalf = cb8
                    uv.oddHalf = cr8
                    UnsafeMutableRawPointer(uRow + x).storeBytes(of: uv, as: SIMD16<UInt8>.self)
                } else {
                    UnsafeMutableRawPointer(uRow + x / 2).storeBytes(of: cb8, as: SIMD8<UInt8>.self)
                    UnsafeMutableRawPointer(vRow + x / 2).storeBytes(of: cr8, as: SIMD8<UInt8>.self)
                }
                x += 16
            }
            // The rest of the row (width not a multiple of 16), two pixels at a time.
            while x < w {
                var rs = 0, gs = 0, bs = 0
                for (row, out) in [(row0, y0), (row1, y1)] {
                    for dx in 0..<2 {
                        let p = row.loadUnaligned(fromByteOffset: 4 * (x + dx), as: UInt32.self)
                        let r = Int((p >> rShift) & 0xff), g = Int((p >> 8) & 0xff), b = Int((p >> bShift) & 0xff)
                        out[x + dx] = m.lumaFixed(r: r, g: g, b: b)
                        rs += r; gs += g; bs += b
                    }
                }
                let c = m.chromaFixed(rs: rs, gs: gs, bs: bs)
                if nv12 {
                    uRow[x] = c.cb
                    uRow[x + 1] = c.cr
                } else {
                    uRow[x / 2] = c.cb
                    vRow[x / 2] = c.cr
                }
                x += 2
            }
        }
    }

    @inline(__always)
    private static func channel(_ p: SIMD16<UInt32>, _ shift: UInt32) -> SIMD16<UInt16> {
        SIMD16<UInt16>(truncatingIfNeeded: (p &>> shift) & 0xff)
    }

    @inline(__always)
    private static func luma(_ r: SIMD16<UInt16>, _ g: SIMD16<UInt16>, _ b: SIMD16<UInt16>, _ m: YCbCrMatrix) -> SIMD16<UInt8> {
        let y = (m.yR &* r &+ m.yG &* g &+ m.yB &* b &+ (128 + (16 << 8))) &>> 8
        return SIMD16<UInt8>(truncatingIfNeeded: y)
    }

    /// The scalar floating-point reference (BT709.reference per pixel and per
    /// 2×2 average). Slow; for tests and for checking new SIMD paths.
    public static func convertReference(from src: UnsafeRawPointer, format: PixelFormat, size: FrameSize, stride: Int,
                                        to dst: PlanarImage) {
        precondition(format.isPacked && dst.size == size)
        let (rShift, bShift): (UInt32, UInt32) = format == .bgrx ? (16, 0) : (0, 16)
        func rgb(_ x: Int, _ y: Int) -> (Double, Double, Double) {
            let p = src.loadUnaligned(fromByteOffset: y * stride + 4 * x, as: UInt32.self)
            return (Double((p >> rShift) & 0xff), Double((p >> 8) & 0xff), Double((p >> bShift) & 0xff))
        }
        let nv12 = dst.format == .nv12
        for y in 0..<size.height {
            for x in 0..<size.width {
                let (r, g, b) = rgb(x, y)
                dst.plane(0)[y * dst.strides[0] + x] = BT709.reference(r: r, g: g, b: b).y
            }
        }
        for cy in 0..<(size.height / 2) {
            for cx in 0..<(size.width / 2) {
                var r = 0.0, g = 0.0, b = 0.0
                for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                    let p = rgb(2 * cx + dx, 2 * cy + dy)
                    r += p.0; g += p.1; b += p.2
                }
                let c = BT709.reference(r: r / 4, g: g / 4, b: b / 4)
                if nv12 {
                    dst.plane(1)[cy * dst.strides[1] + 2 * cx] = c.cb
                    dst.plane(1)[cy * dst.strides[1] + 2 * cx + 1] = c.cr
                } else {
                    dst.plane(1)[cy * dst.strides[1] + cx] = c.cb
                    dst.plane(2)[cy * dst.strides[2] + cx] = c.cr
                }
            }
        }
    }
}
