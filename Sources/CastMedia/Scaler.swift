/// Downscales packed 32-bit frames (BGRx/RGBx; the four bytes are treated
/// alike) with an area-average ("box") filter: each output pixel is the
/// average of the source area it covers, weighted by overlap. That is the
/// right filter for downscaling screen content at any ratio (4:3 for
/// 1440p → 1080p, 2:1 for 2160p → 1080p) without aliasing. Separable:
/// a vertical pass into a 16-bit row, then a horizontal pass.
///
/// Weights are 8-bit fixed point per direction, summing to exactly 256,
/// so a flat colour stays exactly that colour and 1:1 is an exact copy.
public final class Scaler {
    public let source: FrameSize
    public let target: FrameSize

    struct Taps {
        var start: [Int]      // first source index per output index
        var weights: [[UInt16]]  // weights per output index, summing to 256
    }

    let horizontal: Taps
    let vertical: Taps
    private var accumulator: [UInt16]

    public init(from source: FrameSize, to target: FrameSize) {
        precondition(target.width >= 1 && target.height >= 1)
        precondition(target.width <= source.width && target.height <= source.height,
                     "Scaler only downscales (\(source) → \(target))")
        self.source = source
        self.target = target
        horizontal = Self.taps(source: source.width, target: target.width)
        vertical = Self.taps(source: source.height, target: target.height)
        accumulator = Array(repeating: 0, count: source.width * 4 + 16)
    }

    static func taps(source: Int, target: Int) -> Taps {
        let s = Double(source) / Double(target)
        var starts: [Int] = []
        var weights: [[UInt16]] = []
        for i in 0..<target {
            let a = Double(i) * s, b = Double(i + 1) * s
            let first = Int(a.rounded(.down))
            let last = min(source - 1, Int(b.rounded(.up)) - 1)
            var w: [Int] = []
            for j in first...last {
                let overlap = min(b, Double(j + 1)) - max(a, Double(j))
                w.append(Int((overlap / s * 256).rounded()))
            }
            // Make the weights sum to exactly 256, adjusting the largest tap.
            let biggest = w.indices.max { w[$0] < w[$1] }!
            w[biggest] += 256 - w.reduce(0, +)
            // Drop zero taps at the ends (exact boundaries).
            var lo = 0, hi = w.count - 1
            while lo < hi && w[lo] == 0 { lo += 1 }
            while hi > lo && w[hi] == 0 { hi -= 1 }
            starts.append(first + lo)
            weights.append(w[lo...hi].map { UInt16($0) })
        }
        return Taps(start: starts, weights: weights)
    }

    /// Scales `source`-sized pixels at `src` (row stride `srcStride`) into
    /// `target`-sized pixels at `dst` (row stride `dstStride`).
    @_optimize(speed)
    public func scale(_ src: UnsafeRawPointer, srcStride: Int, into dst: UnsafeMutableRawPointer, dstStride: Int) {
        let rowBytes = source.width * 4
        accumulator.withUnsafeMutableBufferPointer { accBuf in
            let acc = accBuf.baseAddress!
            for oy in 0..<target.height {
                // Vertical pass: acc = Σ w · row, over the rows this output row covers.
                let ws = vertical.weights[oy]
                let firstRow = src + vertical.start[oy] * srcStride
                var i = 0
                while i + 16 <= rowBytes {
                    var sum = SIMD16<UInt16>(repeating: 0)
                    for (k, w) in ws.enumerated() {
                        let v = (firstRow + k * srcStride).loadUnaligned(fromByteOffset: i, as: SIMD16<UInt8>.self)
                        sum &+= SIMD16<UInt16>(truncatingIfNeeded: v) &* w
                    }
                    UnsafeMutableRawPointer(acc + i).storeBytes(of: sum, as: SIMD16<UInt16>.self)
                    i += 16
                }
                while i < rowBytes {
                    var sum: UInt16 = 0
                    for (k, w) in ws.enumerated() {
                        sum &+= UInt16((firstRow + k * srcStride).load(fromByteOffset: i, as: UInt8.self)) &* w
                    }
                    acc[i] = sum
                    i += 1
                }
                // Horizontal pass: four channels at once.
                let out = dst + oy * dstStride
                for ox in 0..<target.width {
                    var sum = SIMD4<UInt32>(repeating: 1 << 15)
                    let first = horizontal.start[ox]
                    for (k, w) in horizontal.weights[ox].enumerated() {
                        let px = UnsafeRawPointer(acc + 4 * (first + k)).loadUnaligned(as: SIMD4<UInt16>.self)
                        sum &+= SIMD4<UInt32>(truncatingIfNeeded: px) &* UInt32(w)
                    }
                    out.storeBytes(of: SIMD4<UInt8>(truncatingIfNeeded: sum &>> 16), toByteOffset: 4 * ox,
                                   as: SIMD4<UInt8>.self)
                }
            }
        }
    }
}
