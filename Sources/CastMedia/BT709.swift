/// BT.709 RGB → Y'CbCr at limited ("video", "TV") range, the matrix castd
/// signals in the H.264 VUI (ITU-T H.273: colour_primaries = 1,
/// transfer_characteristics = 1, matrix_coefficients = 1, video_full_range_flag = 0).
///
/// ITU-R BT.709-6 item 3.2: Kr = 0.2126, Kb = 0.0722. Limited range (item
/// 3.4 quantisation): Y' spans 16…235 (219 steps), Cb/Cr span 16…240 around 128 (224 steps).
public enum BT709 {
    public static let kr = 0.2126
    public static let kb = 0.0722
    public static let kg = 1 - kr - kb

    /// The exact formula in floating point, rounded: the scalar reference the
    /// SIMD converter is tested against. `r`, `g`, `b` are 0…255 (fractional for 2×2 averages).
    public static func reference(r: Double, g: Double, b: Double) -> (y: UInt8, cb: UInt8, cr: UInt8) {
        let e = (kr * r + kg * g + kb * b) / 255
        let y = 16 + 219 * e
        let cb = 128 + 224 * ((b / 255 - e) / (2 * (1 - kb)))
        let cr = 128 + 224 * ((r / 255 - e) / (2 * (1 - kr)))
        return (clamp(y), clamp(cb), clamp(cr))
    }

    private static func clamp(_ v: Double) -> UInt8 { UInt8(max(0, min(255, v.rounded()))) }

    // Fixed point, as the SIMD converter computes it (`YCbCrMatrix.bt709`).
    //
    // Luma: coefficients × 219/255 × 2^8, in 16-bit lanes (47·255 + 157·255 +
    // 16·255 + 128 + 16·256 = 60 324 fits in UInt16). 0.2126·219/255·256 =
    // 46.74, 0.7152·219/255·256 = 157.24, 0.0722·219/255·256 = 15.87.
    //
    // Chroma works on the sum of a 2×2 block (0…1020), in 32-bit lanes, with
    // coefficients × 224/255 × 2^14 so that sum·coef has scale 2^16. The
    // third coefficient of each row is set so that the row sums to zero
    // (grey stays at exactly 128).
}

/// The fixed-point coefficients of one RGB → Y'CbCr matrix at limited range
/// (scales as documented in `BT709`), so that the converter can write BT.709
/// (H.264, signalled in its VUI) or BT.601 (VP8: its bitstream has only a
/// colour-space bit whose one defined value is BT.601, RFC 6386 §9.2, and
/// browsers decode it so).
public struct YCbCrMatrix: Sendable, Equatable {
    let yR: UInt16, yG: UInt16, yB: UInt16
    let cbR: Int32, cbG: Int32, cbB: Int32
    let crR: Int32, crG: Int32, crB: Int32

    /// From Kr and Kb, with luma coefficients × 219/255 × 2^8 and chroma × 224/255 × 2^14.
    init(kr: Double, kb: Double) {
        let kg = 1 - kr - kb
        yR = UInt16((kr * 219 / 255 * 256).rounded())
        yG = UInt16((kg * 219 / 255 * 256).rounded())
        yB = UInt16((kb * 219 / 255 * 256).rounded())
        cbR = Int32((-kr / (2 * (1 - kb)) * 224 / 255 * 16384).rounded())
        cbG = Int32((-kg / (2 * (1 - kb)) * 224 / 255 * 16384).rounded())
        cbB = -(cbR + cbG)
        crG = Int32((-kg / (2 * (1 - kr)) * 224 / 255 * 16384).rounded())
        crB = Int32((-kb / (2 * (1 - kr)) * 224 / 255 * 16384).rounded())
        crR = -(crG + crB)
    }

    /// ITU-R BT.709-6 item 3.2.
    public static let bt709 = YCbCrMatrix(kr: BT709.kr, kb: BT709.kb)
    /// ITU-R BT.601-7 item 2.5.1: Kr = 0.299, Kb = 0.114.
    public static let bt601 = YCbCrMatrix(kr: 0.299, kb: 0.114)

    @inline(__always)
    func lumaFixed(r: Int, g: Int, b: Int) -> UInt8 {
        UInt8((Int(yR) * r + Int(yG) * g + Int(yB) * b + 128 + (16 << 8)) >> 8)
    }

    @inline(__always)
    func chromaFixed(rs: Int, gs: Int, bs: Int) -> (cb: UInt8, cr: UInt8) {
        let bias = (128 << 16) + (1 << 15)
        let cb = (Int(cbR) * rs + Int(cbG) * gs + Int(cbB) * bs + bias) >> 16
        let cr = (Int(crR) * rs + Int(crG) * gs + Int(crB) * bs + bias) >> 16
        return (UInt8(cb), UInt8(cr))
    }
}
