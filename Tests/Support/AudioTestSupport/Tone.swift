import Foundation

/// Test signals and their measurement, shared by the Opus tests
/// (CastEncodeTests) and the PipeWire audio capture tests (CastCaptureTests).
public enum Tone {
    public static let sampleRate = 48_000.0

    /// `count` interleaved frames; channel c plays `frequencies[c]` at `amplitudes[c]` (0 = silence),
    /// starting at sample index `start` so that consecutive calls join without a phase jump.
    public static func interleaved(frequencies: [Double], amplitudes: [Double], start: Int, count: Int) -> [Float] {
        let channels = frequencies.count
        var out = [Float](repeating: 0, count: count * channels)
        for i in 0..<count {
            let t = Double(start + i) / sampleRate
            for c in 0..<channels {
                out[i * channels + c] = Float(amplitudes[c] * sin(2 * .pi * frequencies[c] * t))
            }
        }
        return out
    }

    /// Channel `c` of `channels` interleaved ones.
    public static func channel(_ x: [Float], _ c: Int, of channels: Int) -> [Float] {
        stride(from: c, to: x.count, by: channels).map { x[$0] }
    }

    public static func rms(_ x: [Float]) -> Double {
        guard !x.isEmpty else { return 0 }
        return (x.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(x.count)).squareRoot()
    }

    public static func dBFS(_ x: [Float]) -> Double { 20 * log10(max(rms(x), 1e-12)) }

    /// The frequency of a (nearly) pure tone from its rising zero crossings,
    /// interpolated between samples; nil when fewer than two crossings.
    public static func frequency(_ x: [Float]) -> Double? {
        var crossings: [Double] = []
        for i in 1..<max(1, x.count) where x[i - 1] < 0 && x[i] >= 0 {
            let a = Double(x[i - 1]), b = Double(x[i])
            crossings.append(Double(i - 1) + (-a) / (b - a))
        }
        guard crossings.count >= 2, let first = crossings.first, let last = crossings.last else { return nil }
        return Double(crossings.count - 1) * sampleRate / (last - first)
    }

    /// The amplitude of the component at `frequency` (Goertzel's algorithm).
    public static func amplitude(_ x: [Float], at frequency: Double) -> Double {
        let w = 2 * Double.pi * frequency / sampleRate, k = 2 * cos(w)
        var s1 = 0.0, s2 = 0.0
        for v in x {
            let s = Double(v) + k * s1 - s2
            s2 = s1
            s1 = s
        }
        let power = s1 * s1 + s2 * s2 - k * s1 * s2
        return 2 * power.squareRoot() / Double(x.count)
    }
}
