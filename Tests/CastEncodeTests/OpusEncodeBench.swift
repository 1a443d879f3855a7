import AudioTestSupport
import BenchSupport
import CastCore
import Foundation
import Testing
@testable import CastEncode

/// Opus encode cost per frame and the algorithmic latency, for 10 and 20 ms
/// frames, AUDIO and RESTRICTED_LOWDELAY, FEC off and on (with 10 % expected
/// loss, which makes libopus code LBRR). One JSON object per run.
@Suite(.serialized, .enabled(if: Bench.enabled, "a benchmark: run Scripts/bench-capture-encode"))
struct OpusEncodeBench {
    /// Ten seconds of "music": three drifting partials and a little noise, stereo.
    static func signal(start: Int, count: Int) -> [Float] {
        var out = [Float](repeating: 0, count: count * 2)
        var seed = UInt32(truncatingIfNeeded: start) &* 2_654_435_761 | 1
        for i in 0..<count {
            let t = Double(start + i) / 48_000
            let f = 220 * (1 + 0.5 * sin(2 * .pi * 0.2 * t))
            seed ^= seed << 13; seed ^= seed >> 17; seed ^= seed << 5
            let noise = Double(seed % 2001) / 1000 - 1
            let m = 0.3 * sin(2 * .pi * f * t) + 0.15 * sin(2 * .pi * 2.01 * f * t) + 0.1 * sin(2 * .pi * 5.3 * f * t)
            out[2 * i] = Float(m + 0.02 * noise)
            out[2 * i + 1] = Float(0.8 * m - 0.02 * noise)
        }
        return out
    }

    @Test(arguments: [10, 20], [OpusAudioEncoder.Application.audio, .restrictedLowDelay])
    func encode(frameMilliseconds: Int, application: OpusAudioEncoder.Application) throws {
        for fec in [false, true] {
            let enc = try OpusAudioEncoder(settings: .init(frameDuration: .milliseconds(frameMilliseconds),
                                                           application: application, inbandFEC: fec,
                                                           expectedPacketLossPercent: fec ? 10 : 0))
            let n = enc.settings.samplesPerChannel
            let frames = 10_000 / frameMilliseconds
            let pcm = (0..<frames).map { Self.signal(start: $0 * n, count: n) }
            let clock = SystemMonotonicClock()
            var times: [Int64] = [], bytes = 0
            var modes: [String: Int] = [:]
            let before = Bench.usage()
            for f in pcm {
                let t0 = clock.now()
                let p = try enc.encode(f)
                times.append((clock.now() - t0).totalNanoseconds)
                bytes += p.count
                modes[OpusPacketMode(packet: p)?.rawValue ?? "?", default: 0] += 1
            }
            let cpu = Bench.usage().cpu - before.cpu
            Bench.emit([
                "bench": "opus-encode", "frame_ms": frameMilliseconds, "application": application.rawValue, "fec": fec,
                "encode_ms": Bench.percentiles(times), "cpu_percent_of_realtime": (cpu / 10 * 1000).rounded() / 10,
                "kbps": bytes * 8 / 10 / 1000, "lookahead_ms": Double(enc.lookahead) / 48,
                "algorithmic_latency_ms": Double(frameMilliseconds) + Double(enc.lookahead) / 48, "modes": modes,
            ])
        }
    }
}
