import AudioTestSupport
import BenchSupport
import CastCore
import CastSystem
import Foundation
import Testing
@testable import CastEncode

/// Opus encode cost per frame and the algorithmic latency, for 10 and 20 ms
/// frames, AUDIO and RESTRICTED_LOWDELAY, FEC off and on (with 10 % expected
/// loss, which makes libopus code LBRR). One JSON object per run.
@Suite(.serialized, .enabled(if: Bench.enabled, "a benchmark: CASTD_BENCH=1 swift test --filter OpusEncodeBench"))
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

    /// 5 % random loss (seeded), 10 s of the signal: how close the lost frames
    /// come back to what the lossless decode gives, with FEC off, FEC on while
    /// planning for 5 % (libopus stays in CELT for music: no LBRR), and FEC on
    /// while planning for 10 % (hybrid, LBRR in every packet).
    @Test func lossConcealment() throws {
        for (fec, planned) in [(false, 0), (true, 5), (true, 10)] {
            let enc = try OpusAudioEncoder(settings: .init(inbandFEC: fec, expectedPacketLossPercent: planned))
            let n = enc.settings.samplesPerChannel
            let packets = try (0..<500).map { try enc.encode(Self.signal(start: $0 * n, count: n)) }
            var seed: UInt64 = 0x5eed   // the same losses in every run
            let lost = (0..<500).map { i -> Bool in
                seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                return i >= 10 && (seed >> 33) % 100 < 5
            }
            let reference = try OpusAudioDecoder(channels: 2), lossy = try OpusAudioDecoder(channels: 2)
            var snrs: [Double] = []
            for i in 0..<500 {
                let ref = try reference.decode(packets[i], samplesPerChannel: n)
                let got: [Float]
                if !lost[i] {
                    got = try lossy.decode(packets[i], samplesPerChannel: n)
                } else if i + 1 < 500, !lost[i + 1] {
                    got = try lossy.decode(packets[i + 1], samplesPerChannel: n, fec: true)
                } else {
                    got = try lossy.decode(nil, samplesPerChannel: n)
                }
                guard lost[i] else { continue }
                var sig = 0.0, err = 0.0
                for k in ref.indices {
                    sig += Double(ref[k]) * Double(ref[k])
                    err += Double(ref[k] - got[k]) * Double(ref[k] - got[k])
                }
                snrs.append(10 * log10(max(sig, 1e-12) / max(err, 1e-12)))
            }
            let recovered = snrs.filter { $0 > 10 }.count
            Bench.emit([
                "bench": "opus-loss", "loss_percent": 5, "fec": fec, "planned_loss_percent": planned,
                "lost_frames": snrs.count, "lost_frames_snr_db_mean": (snrs.reduce(0, +) / Double(max(1, snrs.count)) * 10).rounded() / 10,
                "lost_frames_above_10db": recovered,
                "modes": OpusPacketMode(packet: packets[100])?.rawValue ?? "?",
            ])
        }
    }
}
