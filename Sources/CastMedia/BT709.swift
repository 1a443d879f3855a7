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

    // Fixed point, as the SIMD converter computes it.
    //
    // Luma: coefficients × 219/255 × 2^8, in 16-bit lanes (47·255 + 157·255 +
    // 16·255 + 128 + 16·256 = 60 324 fits in UInt16). 0.2126·219/255·256 =
    // 46.74, 0.7152·219/255·256 = 157.24, 0.0722·219/255·256 = 15.87.
    static let yR: UInt16 = 47
    static let yG: UInt16 = 157
    static let yB: UInt16 = 16

    // Chroma works on the sum of a 2×2 block (0…1020), in 32-bit lanes, with
    // coefficients × 224/255 × 2^14 so that sum·coef has scale 2^16. The
    // third coefficient of each row is set so that the row sums to zero
    // (grey stays at exactly 128).
    static let cbR = Int32((-kr / (2 * (1 - kb)) * 224 / 255 * 16384).rounded())
    static let cbG = Int32((-kg / (2 * (1 - kb)) * 224 / 255 * 16384).rounded())
    static let cbB = -(cbR + cbG)
    static let crG = Int32((-kg / (2 * (1 - kr)) * 224 / 255 * 16384).rounded())
    static let crB = Int32((-kb / (2 * (1 - kr)) * 224 / 255 * 16384).rounded())
    static let crR = -(crG + crB)

    @inline(__always)
    static func lumaFixed(r: Int, g: Int, b: Int) -> UInt8 {
        UInt8((Int(yR) * r + Int(yG) * g + Int(yB) * b + 128 + (16 << 8)) >> 8)
    }

    /// `rs`, `gs`, `bs` are sums over a 2×2 block.
    @inline(__always)
    static func chromaFixed(rs: Int, gs: Int, bs: Int) -> (cb: UInt8, cr: UInt8) {
        let bias = (128 << 16) + (1 << 15)
        let cb = (Int(cbR) * rs + Int(cbG) * gs + Int(cbB) * bs + bias) >> 16
        let cr = (Int(crR) * rs + Int(crG) * gs + Int(crB) * bs + bias) >> 16
        return (UInt8(cb), UInt8(cr))
    }
}
