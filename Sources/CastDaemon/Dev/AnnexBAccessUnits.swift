/// Splits an H.264 Annex B byte stream (a `.264` file) into access units
/// (ITU-T H.264 §7.4.1.2.3): a new access unit begins at an access unit
/// delimiter, or at an SPS/PPS/SEI after a picture's slices, or at a slice
/// whose first_mb_in_slice is 0. Used by the developer sender to stream a
/// known clip; the live path gets whole access units from its encoder.
public enum AnnexBAccessUnits {
    /// Byte ranges of the NAL units (without start codes).
    static func nalRanges(_ b: [UInt8]) -> [Range<Int>] {
        var starts: [(code: Int, payload: Int)] = []
        var i = 0
        while i + 2 < b.count {
            if b[i] == 0, b[i + 1] == 0, b[i + 2] == 1 {
                let code = (i > 0 && b[i - 1] == 0) ? i - 1 : i
                starts.append((code, i + 3))
                i += 3
            } else {
                i += 1
            }
        }
        var out: [Range<Int>] = []
        for (k, s) in starts.enumerated() {
            let end = k + 1 < starts.count ? starts[k + 1].code : b.count
            if s.payload < end { out.append(s.payload..<end) }
        }
        return out
    }

    public static func split(_ stream: [UInt8]) -> [[UInt8]] {
        var units: [[UInt8]] = []
        var current: [UInt8] = []
        var seenSlice = false
        for r in nalRanges(stream) {
            let type = stream[r.lowerBound] & 0x1f
            let isSlice = type == 1 || type == 5
            var startsNew = false
            switch type {
            case 9: startsNew = true                         // access unit delimiter
            case 6, 7, 8: startsNew = seenSlice               // SEI, SPS, PPS after a picture
            case 1, 5:
                // first_mb_in_slice is ue(v): its first bit is 1 exactly when it is 0.
                let firstMBIsZero = r.count > 1 && stream[r.lowerBound + 1] & 0x80 != 0
                startsNew = seenSlice && firstMBIsZero
            default: break
            }
            if startsNew, !current.isEmpty {
                units.append(current)
                current = []
                seenSlice = false
            }
            current += [0, 0, 0, 1]
            current += stream[r]
            if isSlice { seenSlice = true }
        }
        if !current.isEmpty { units.append(current) }
        return units
    }

    /// Whether an access unit holds an IDR slice.
    public static func isKeyframe(_ au: [UInt8]) -> Bool {
        nalRanges(au).contains { au[$0.lowerBound] & 0x1f == 5 }
    }
}
