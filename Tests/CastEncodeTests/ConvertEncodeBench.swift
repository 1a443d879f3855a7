import BenchSupport
import Testing
import Foundation
import CastCore
import CastSystem
import CastMedia
@testable import CastEncode

/// Convert (BGRx → I420, SIMD) and encode (x264) at 1080p30, for a static
/// and a busy screen, per preset. Prints one JSON object per run.
@Suite(.serialized, .enabled(if: Bench.enabled, "a benchmark: run Scripts/bench-capture-encode"))
struct ConvertEncodeBench {
    static let size = FrameSize(width: 1920, height: 1080)
    static let frames = Bench.frames

    /// Busy: a field of random 8×8 blocks scrolled diagonally, regenerated with row copies.
    final class BusySource {
        let field: [UInt32]
        let fw: Int
        /// How far the field scrolls before it wraps (a whole-screen jump no encoder predicts).
        let margin: Int
        init(margin: Int = 512) {
            self.margin = margin
            fw = size.width + margin
            let fh = size.height + margin
            var r: UInt32 = 0x1234_5678
            var f = [UInt32](repeating: 0, count: fw * fh)
            var blocks = [UInt32](repeating: 0, count: (fw / 8 + 1) * (fh / 8 + 1))
            for i in blocks.indices { r ^= r << 13; r ^= r >> 17; r ^= r << 5; blocks[i] = r & 0xffffff }
            for y in 0..<fh { for x in 0..<fw { f[y * fw + x] = blocks[(y / 8) * (fw / 8 + 1) + x / 8] } }
            field = f
        }
        func fill(_ dst: UnsafeMutableRawPointer, frame n: Int) {
            let dx = (n * 9) % margin, dy = (n * 5) % margin
            field.withUnsafeBytes { src in
                for y in 0..<size.height {
                    memcpy(dst + y * size.width * 4, src.baseAddress! + ((y + dy) * fw + dx) * 4, size.width * 4)
                }
            }
        }
    }

    @Test(arguments: ["superfast", "veryfast"], ["static", "busy"])
    func convertAndEncode(preset: String, scenario: String) throws {
        let clock = SystemMonotonicClock()
        let config = EncoderConfig(size: Self.size, frameRate: 30, bitrate: 4_000_000)
        let enc = try X264Encoder(config: config, preset: preset)
        let packed = MemorySlot(capacity: Self.size.pixelCount * 4)
        let image = PlanarImage(format: .i420, size: Self.size)
        let busy = BusySource()
        busy.fill(packed.bytes, frame: 0)
        var convert: [Int64] = [], encode: [Int64] = [], bytes = 0
        let before = Bench.usage()
        let start = clock.now()
        for n in 0..<Self.frames {
            if scenario == "busy" { busy.fill(packed.bytes, frame: n) }
            let t0 = clock.now()
            PixelConverter.convert(from: packed.bytes, format: .bgrx, size: Self.size, stride: Self.size.width * 4, to: image)
            let t1 = clock.now()
            let au = try #require(try enc.encode(image, pts: t1))
            let t2 = clock.now()
            convert.append((t1 - t0).totalNanoseconds)
            encode.append((t2 - t1).totalNanoseconds)
            bytes += au.bytes.count
        }
        let wall = (clock.now() - start).seconds
        let after = Bench.usage()
        Bench.emit([
            "bench": "convert-encode", "size": "\(Self.size)", "preset": preset, "scenario": scenario,
            "frames": Self.frames, "threads": X264Encoder.sliceThreads(cores: ProcessInfo.processInfo.activeProcessorCount),
            "convert_ms": Bench.percentiles(convert), "encode_ms": Bench.percentiles(encode),
            "bitrate_bps": bytes * 8 * 30 / Self.frames,
            "cpu_percent_of_one_core": ((after.cpu - before.cpu) / wall * 1000).rounded() / 10,
            "cpu_ms_per_frame": ((after.cpu - before.cpu) / Double(Self.frames) * 1e5).rounded() / 100,
            "max_rss_mib": (after.maxRSSMiB * 10).rounded() / 10,
        ])
        #expect(convert.count == Self.frames)
    }
}
