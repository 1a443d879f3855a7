#if canImport(Glibc)
import Glibc   // log10 only
#endif

/// The client-to-mixer audio level header extension (RFC 6464).
extension RTPExtensionValue {
    public static let audioLevelURI = "urn:ietf:params:rtp-hdrext:ssrc-audio-level"

    /// RFC 6464 §3, one byte:
    ///
    ///  0 1 2 3 4 5 6 7
    /// +-+-+-+-+-+-+-+-+
    /// |V|   level     |
    /// +-+-+-+-+-+-+-+-+
    ///
    /// V: voice activity; level: 0…127, the level in −dBov (127 is silence or quieter).
    public static func audioLevel(minusDBov level: UInt8, voiceActivity: Bool) -> [UInt8] {
        [audioLevelValue(minusDBov: level, voiceActivity: voiceActivity)]
    }

    /// The same byte as a value (the send path stamps it without an array, issue 19).
    public static func audioLevelValue(minusDBov level: UInt8, voiceActivity: Bool) -> UInt8 {
        (voiceActivity ? 0x80 : 0) | min(level, 127)
    }

    /// The level of a frame of float samples (full scale ±1) in −dBov, 0…127
    /// (RFC 6464 §3: the RMS level relative to the overload point; digital
    /// silence is 127). NaN and infinite samples count as silence.
    public static func minusDBov(of samples: UnsafeBufferPointer<Float>) -> UInt8 {
        var sum = 0.0, n = 0
        for s in samples where s.isFinite {
            let v = Double(max(-1, min(1, s)))
            sum += v * v
            n += 1
        }
        guard n > 0, sum > 0 else { return 127 }
        let rms = (sum / Double(n)).squareRoot()
        // 20·log10(rms) is ≤ 0 for a clamped signal; −dBov rounds to the nearest dB.
        let db = -20 * log10(rms)
        return UInt8(max(0, min(127, db.rounded())))
    }
}
