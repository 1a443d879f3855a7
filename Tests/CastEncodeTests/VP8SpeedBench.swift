import BenchSupport
import Testing
import Foundation
import CastCore
import CastMedia
@testable import CastEncode

/// Issue 15: what each libvpx setting costs at 1080p, by CPU time, not wall time.
///
/// Each row is `VP8Encoder.Tuning()` with one knob changed, encoding the
/// painter's busy screen (random 8×8 blocks scrolled by (9, 5) a frame,
/// `ConvertEncodeBench.BusySource`, converted with BT.601 as the VP8 path does)
/// or the same field standing still. The cost of a frame is the process's CPU
/// time across `encode` alone (libvpx's worker threads included; the suite runs
/// serially, so nothing else of this process runs then), and for one thread its
/// thread CPU time too (`CLOCK_THREAD_CPUTIME_ID`). Rows are interleaved over
/// `CASTD_BENCH_ROUNDS` rounds (3) and the median round is reported, so a load
/// change on the shared machine hits every row alike. Then ffmpeg (`-c:v
/// libvpx -deadline realtime`) and GStreamer (`vp8enc deadline=1`) encode the
/// same frames with the same settings, their CPU (`RUSAGE_CHILDREN`, less a run
/// that only reads the frames) as a ratio to castd's.
///
///     CASTD_BENCH=1 swift test --filter VP8SpeedBench
@Suite(.serialized, .enabled(if: Bench.enabled, "a benchmark: CASTD_BENCH=1"))
struct VP8SpeedBench {
    static let size = FrameSize(width: 1920, height: 1080)
    static var rounds: Int { ProcessInfo.processInfo.environment["CASTD_BENCH_ROUNDS"].flatMap { Int($0) }.map { max(1, $0) } ?? 3 }
    /// The sweep's frames per run (the first, a key frame, is left out of the per-frame figures):
    /// 30, or fewer with CASTD_BENCH_FRAMES.
    static var frames: Int { min(Bench.frames, 30) }

    struct Row {
        let name: String
        let scenario: String
        let tuning: VP8Encoder.Tuning
    }

    static var rows: [Row] {
        func t(_ change: (inout VP8Encoder.Tuning) -> Void) -> VP8Encoder.Tuning {
            var t = VP8Encoder.Tuning()
            change(&t)
            return t
        }
        var rows = [Row(name: "chosen", scenario: "busy", tuning: VP8Encoder.Tuning())]
        for s: Int32 in [-4, -6, -8, -10, -14, -16, 8, 16] {
            rows.append(Row(name: "cpu-used \(s)", scenario: "busy", tuning: t { $0.speed = s }))
        }
        rows += [
            Row(name: "screen-content 0", scenario: "busy", tuning: t { $0.screenContentMode = 0 }),
            Row(name: "screen-content 2", scenario: "busy", tuning: t { $0.screenContentMode = 2 }),
            Row(name: "2 threads", scenario: "busy", tuning: t { $0.threads = 2 }),
            Row(name: "2 threads, 4 token partitions", scenario: "busy", tuning: t { $0.threads = 2; $0.tokenPartitions = 2 }),
            Row(name: "4 token partitions", scenario: "busy", tuning: t { $0.tokenPartitions = 2 }),
            Row(name: "not error resilient", scenario: "busy", tuning: t { $0.errorResilient = false }),
            Row(name: "drop threshold 30", scenario: "busy", tuning: t { $0.dropFrameThreshold = 30 }),
            Row(name: "max q 56", scenario: "busy", tuning: t { $0.maxQuantizer = 56 }),
            Row(name: "noise sensitivity 1", scenario: "busy", tuning: t { $0.noiseSensitivity = 1 }),
            Row(name: "max intra 0 (unlimited)", scenario: "busy", tuning: t { $0.maxIntraBitratePct = 0 }),
            Row(name: "deadline 33333 us", scenario: "busy", tuning: t { $0.deadlineMicroseconds = 33_333 }),
            Row(name: "before (-8, 2 threads, scm 2, drop 30, q 56)", scenario: "busy", tuning: t {
                $0.speed = -8; $0.threads = 2; $0.screenContentMode = 2; $0.dropFrameThreshold = 30; $0.maxQuantizer = 56
            }),
            Row(name: "chosen", scenario: "static", tuning: VP8Encoder.Tuning()),
            Row(name: "static threshold 0", scenario: "static", tuning: t { $0.staticThreshold = 0 }),
            Row(name: "static threshold 100", scenario: "static", tuning: t { $0.staticThreshold = 100 }),
            Row(name: "static threshold 0", scenario: "busy", tuning: t { $0.staticThreshold = 0 }),
            Row(name: "static threshold 100", scenario: "busy", tuning: t { $0.staticThreshold = 100 }),
        ]
        return rows
    }

    struct Run {
        var cpuMsPerFrame: Double
        var threadMsPerFrame: Double
        var wallMsPerFrame: Double
        var delivered: Int
        var bitrate: Int
    }

    /// The frames as the VP8 path sees them (BGRx → I420 with BT.601), converted once before
    /// any timing: the busy field's first `count` frames, and frame 0 for the still screen.
    final class Frames {
        let busy: [PlanarImage]
        init(count: Int) {
            let source = ConvertEncodeBench.BusySource()
            let packed = MemorySlot(capacity: VP8SpeedBench.size.pixelCount * 4)
            busy = (0..<count).map { n in
                source.fill(packed.bytes, frame: n)
                let image = PlanarImage(format: .i420, size: VP8SpeedBench.size)
                PixelConverter.convert(from: packed.bytes, format: .bgrx, size: VP8SpeedBench.size,
                                       stride: VP8SpeedBench.size.width * 4, to: image, matrix: .bt601)
                return image
            }
        }
        func image(_ n: Int, scenario: String) -> PlanarImage { scenario == "busy" ? busy[n % busy.count] : busy[0] }
    }

    static func cpuNanoseconds(_ clock: clockid_t) -> Int64 {
        var ts = timespec()
        clock_gettime(clock, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    static func run(_ row: Row, frames source: Frames) throws -> Run {
        let config = EncoderConfig(size: size, frameRate: 30, bitrate: 4_000_000)
        let enc = try VP8Encoder(config: config, tuning: row.tuning)
        var cpu: Int64 = 0, thread: Int64 = 0, wall: Int64 = 0, delivered = 0, bytes = 0
        for n in 0..<frames {
            let image = source.image(n, scenario: row.scenario)
            let p0 = cpuNanoseconds(CLOCK_PROCESS_CPUTIME_ID), t0 = cpuNanoseconds(CLOCK_THREAD_CPUTIME_ID)
            let w0 = cpuNanoseconds(CLOCK_MONOTONIC)
            let au = try enc.encode(image, pts: Instant(nanoseconds: Int64(n) * 33_333_333))
            if n > 0 {
                cpu += cpuNanoseconds(CLOCK_PROCESS_CPUTIME_ID) - p0
                thread += cpuNanoseconds(CLOCK_THREAD_CPUTIME_ID) - t0
                wall += cpuNanoseconds(CLOCK_MONOTONIC) - w0
                if let au { delivered += 1; bytes += au.bytes.count }
            }
        }
        let m = Double(frames - 1)
        return Run(cpuMsPerFrame: Double(cpu) / m / 1e6, threadMsPerFrame: Double(thread) / m / 1e6,
                   wallMsPerFrame: Double(wall) / m / 1e6, delivered: delivered, bitrate: Int(Double(bytes * 8) * 30 / m))
    }

    static func median(_ v: [Double]) -> Double { v.sorted()[v.count / 2] }
    static func r1(_ v: Double) -> Double { (v * 10).rounded() / 10 }

    @Test func sweep() throws {
        let source = Frames(count: Self.frames)
        let rows = Self.rows
        var runs = [[Run]](repeating: [], count: rows.count)
        for _ in 0..<Self.rounds {
            for (i, row) in rows.enumerated() { runs[i].append(try Self.run(row, frames: source)) }
        }
        for (i, row) in rows.enumerated() {
            let r = runs[i]
            Bench.emit([
                "bench": "vp8-speed", "row": row.name, "scenario": row.scenario, "size": "\(Self.size)",
                "frames": Self.frames - 1, "rounds": r.count, "tuning": "\(row.tuning)",
                "cpu_ms_per_frame": Self.r1(Self.median(r.map(\.cpuMsPerFrame))),
                "thread_cpu_ms_per_frame": Self.r1(Self.median(r.map(\.threadMsPerFrame))),
                "wall_ms_per_frame": Self.r1(Self.median(r.map(\.wallMsPerFrame))),
                "delivered_fps": Self.r1(Self.median(r.map { Double($0.delivered) * 30 / Double(Self.frames - 1) })),
                "bitrate_kbps": Int(Self.median(r.map { Double($0.bitrate) / 1000 })),
                "load_1min": Self.loadAverage(),
            ])
        }
        #expect(runs.allSatisfy { $0.count == Self.rounds })
    }

    /// Why libvpx spent twice x264's bits on the busy field in a cast: the motion a frame.
    /// A cast skips frames and lowers its frame rate under load, so between two encoded
    /// frames the painter's field often moved two or three steps, not one. Each row encodes
    /// 40 frames of the field scrolled by `step` × (9, 5) pixels a frame (no wrap), 1080p,
    /// 4 Mbit/s, 30 fps, and reports bytes a frame, CPU and luma PSNR (ffmpeg decodes the
    /// frames; compared with the source) after the key frame; x264 superfast (castd's H.264
    /// settings, one thread) encodes the same frames; the other knobs at two steps a frame.
    /// One round: bytes and PSNR do not depend on the load at a fixed (negative) speed,
    /// only the CPU does.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg")))
    func motion() throws {
        let n = 40
        let source = ConvertEncodeBench.BusySource(margin: 3 * 9 * n)
        let packed = MemorySlot(capacity: Self.size.pixelCount * 4)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("castd-vp8-motion-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        func t(_ change: (inout VP8Encoder.Tuning) -> Void) -> VP8Encoder.Tuning {
            var t = VP8Encoder.Tuning()
            change(&t)
            return t
        }
        let speeds: [(String, VP8Encoder.Tuning?)] = [-6, -8, -10, -12].map { s in ("cpu-used \(s)", t { $0.speed = s }) }
            + [("x264 superfast", nil)]
        // The other knobs at two steps a frame, where the speed decides (at one step they change nothing).
        let knobs: [(String, VP8Encoder.Tuning?)] = [
            ("screen-content 0", t { $0.screenContentMode = 0 }), ("screen-content 2", t { $0.screenContentMode = 2 }),
            ("static threshold 100", t { $0.staticThreshold = 100 }), ("not error resilient", t { $0.errorResilient = false }),
            ("4 token partitions", t { $0.tokenPartitions = 2 }),
        ]
        for step in 1...3 {
            let rows = step == 2 ? speeds + knobs : speeds
            let frames: [PlanarImage] = (0..<n).map { i in
                source.fill(packed.bytes, frame: i * step)
                let image = PlanarImage(format: .i420, size: Self.size)
                PixelConverter.convert(from: packed.bytes, format: .bgrx, size: Self.size, stride: Self.size.width * 4,
                                       to: image, matrix: .bt601)
                return image
            }
            let sourceFile = dir.appendingPathComponent("source.yuv")
            guard FileManager.default.createFile(atPath: sourceFile.path, contents: nil) else { throw CastError(.encoder, "cannot create \(sourceFile.path)") }
            let out = try FileHandle(forWritingTo: sourceFile)
            for image in frames { out.write(Data(image.packedBytes())) }
            try out.close()
            for (name, tuning) in rows {
                let config = EncoderConfig(size: Self.size, frameRate: 30, bitrate: 4_000_000)
                let encoder: VideoEncoder = try tuning.map { try VP8Encoder(config: config, tuning: $0) }
                    ?? X264Encoder(config: config, preset: "superfast", threads: 1)
                var units: [[UInt8]] = [], cpu: Int64 = 0
                for (i, image) in frames.enumerated() {
                    let p0 = Self.cpuNanoseconds(CLOCK_PROCESS_CPUTIME_ID)
                    let au = try encoder.encode(image, pts: Instant(nanoseconds: Int64(i) * 33_333_333))
                    if i > 0 { cpu += Self.cpuNanoseconds(CLOCK_PROCESS_CPUTIME_ID) - p0 }
                    units.append(au?.bytes ?? [])
                }
                let psnr = try Self.lumaPSNR(units, source: sourceFile, h264: tuning == nil, in: dir)
                let bytes = units.dropFirst().map(\.count)
                let mean = Double(bytes.reduce(0, +)) / Double(n - 1)
                Bench.emit([
                    "bench": "vp8-motion", "row": name, "step": step, "scroll_px": "\(9 * step),\(5 * step)",
                    "size": "\(Self.size)", "frames": n - 1, "tuning": tuning.map { "\($0)" } ?? "x264 superfast, 1 thread",
                    "bytes_per_frame": Int(mean), "kbps_at_30fps": Int(mean * 8 * 30 / 1000), "max_frame_bytes": bytes.max() ?? 0,
                    "cpu_ms_per_frame": Self.r1(Double(cpu) / Double(n - 1) / 1e6), "luma_psnr_db": (psnr * 100).rounded() / 100,
                    "load_1min": Self.loadAverage(),
                ])
                #expect(bytes.allSatisfy { $0 > 0 }, "\(name): every frame comes out")
            }
        }
    }

    /// Luma PSNR of the decoded frames after the first against their sources (`source`, raw
    /// I420), by ffmpeg's psnr filter (from the mean squared error over those frames).
    static func lumaPSNR(_ units: [[UInt8]], source: URL, h264: Bool, in dir: URL) throws -> Double {
        let input = dir.appendingPathComponent(h264 ? "a.264" : "a.ivf")
        try Data(h264 ? units.flatMap { $0 } : IVF.file(units, size: size)).write(to: input)
        let log = try CastEncodeTests.run("/usr/bin/ffmpeg", ["-nostdin", "-hide_banner"] + (h264 ? ["-f", "h264"] : []) + [
            "-i", input.path, "-f", "rawvideo", "-pix_fmt", "yuv420p", "-s", "\(size.width)x\(size.height)", "-i", source.path,
            "-lavfi", "[0:v]trim=start_frame=1,settb=1/30,setpts=N[a];[1:v]trim=start_frame=1,settb=1/30,setpts=N[b];[a][b]psnr", "-f", "null", "-"])
        guard let line = log.split(separator: "\n").last(where: { $0.contains("PSNR y:") }),
              let y = line.split(separator: " ").first(where: { $0.hasPrefix("y:") }), let value = Double(y.dropFirst(2)) else {
            throw CastError(.encoder, "no PSNR from ffmpeg: \(log.suffix(400))")
        }
        return value
    }

    static func loadAverage() -> Double {
        var l = [Double](repeating: 0, count: 3)
        return getloadavg(&l, 3) > 0 ? r1(l[0]) : -1
    }

    /// CPU seconds of the children reaped so far (user + system).
    static func childrenCPU() -> Double {
        var u = rusage()
        getrusage(RUSAGE_CHILDREN.rawValue, &u)
        return Double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + Double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6
    }

    /// CPU seconds one child spent (it must exit 0).
    static func childCPU(_ path: String, _ args: [String]) throws -> Double {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = args
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        let before = childrenCPU()
        try p.run()
        p.waitUntilExit()
        let used = childrenCPU() - before
        guard p.terminationStatus == 0 else { throw CastError(.encoder, "\(path) exited \(p.terminationStatus)") }
        return used
    }

    /// castd vs ffmpeg vs GStreamer on the same busy frames, same settings, one thread each.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg")
                   && FileManager.default.isExecutableFile(atPath: "/usr/bin/gst-launch-1.0")))
    func againstFfmpegAndGStreamer() throws {
        let n = min(Bench.frames, 90)
        let t = VP8Encoder.Tuning()
        let source = Frames(count: n)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("castd-vp8-speed-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let yuv = dir.appendingPathComponent("busy.yuv")
        guard FileManager.default.createFile(atPath: yuv.path, contents: nil) else { throw CastError(.encoder, "cannot create \(yuv.path)") }
        let out = try FileHandle(forWritingTo: yuv)
        for i in 0..<n { out.write(Data(source.image(i, scenario: "busy").packedBytes())) }
        try out.close()

        let ffIn = ["-nostdin", "-v", "error", "-f", "rawvideo", "-pix_fmt", "yuv420p", "-s", "1920x1080", "-r", "30", "-i", yuv.path]
        let ffEnc = ["-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "\(t.speed)", "-threads", "\(t.threads)",
                     "-b:v", "4M", "-minrate", "4M", "-maxrate", "4M", "-bufsize", "4M", "-lag-in-frames", "0",
                     "-error-resilient", "1", "-qmin", "2", "-qmax", "\(t.maxQuantizer)", "-static-thresh", "\(t.staticThreshold)",
                     "-drop-threshold", "\(t.dropFrameThreshold)", "-undershoot-pct", "100", "-max-intra-rate", "\(t.maxIntraBitratePct)",
                     "-g", "100000"]
        let gstIn = ["-q", "filesrc", "location=\(yuv.path)", "blocksize=\(Self.size.pixelCount * 3 / 2)", "!",
                     "rawvideoparse", "width=1920", "height=1080", "format=i420", "framerate=30/1", "!"]
        let gstEnc = ["vp8enc", "deadline=1", "cpu-used=\(t.speed)", "threads=\(t.threads)", "end-usage=cbr",
                      "target-bitrate=4000000", "lag-in-frames=0", "error-resilient=default", "min-quantizer=2",
                      "max-quantizer=\(t.maxQuantizer)", "static-threshold=\(t.staticThreshold)",
                      "dropframe-threshold=\(t.dropFrameThreshold)", "undershoot=100", "max-intra-bitrate=\(t.maxIntraBitratePct)",
                      "keyframe-mode=disabled", "!"]
        var castd: [Double] = [], ffmpeg: [Double] = [], gst: [Double] = []
        for _ in 0..<Self.rounds {
            // castd: every frame's encode, the key frame included, as the tools' totals include theirs.
            let enc = try VP8Encoder(config: EncoderConfig(size: Self.size, frameRate: 30, bitrate: 4_000_000), tuning: t)
            var cpu: Int64 = 0
            for i in 0..<n {
                let image = source.image(i, scenario: "busy")
                let p0 = Self.cpuNanoseconds(CLOCK_PROCESS_CPUTIME_ID)
                _ = try enc.encode(image, pts: Instant(nanoseconds: Int64(i) * 33_333_333))
                cpu += Self.cpuNanoseconds(CLOCK_PROCESS_CPUTIME_ID) - p0
            }
            castd.append(Double(cpu) / Double(n) / 1e6)
            let ffBase = try Self.childCPU("/usr/bin/ffmpeg", ffIn + ["-f", "null", "-"])
            ffmpeg.append((try Self.childCPU("/usr/bin/ffmpeg", ffIn + ffEnc + ["-f", "null", "-"]) - ffBase) / Double(n) * 1000)
            let gstBase = try Self.childCPU("/usr/bin/gst-launch-1.0", gstIn + ["fakesink"])
            gst.append((try Self.childCPU("/usr/bin/gst-launch-1.0", gstIn + gstEnc + ["fakesink"]) - gstBase) / Double(n) * 1000)
        }
        let c = Self.median(castd), f = Self.median(ffmpeg), g = Self.median(gst)
        Bench.emit([
            "bench": "vp8-vs-tools", "size": "\(Self.size)", "frames": n, "rounds": castd.count, "tuning": "\(t)",
            "castd_cpu_ms_per_frame": Self.r1(c), "ffmpeg_cpu_ms_per_frame": Self.r1(f), "gst_cpu_ms_per_frame": Self.r1(g),
            "castd_over_ffmpeg": (c / f * 100).rounded() / 100, "castd_over_gst": (c / g * 100).rounded() / 100,
            "load_1min": Self.loadAverage(),
        ])
        #expect(c > 0 && f > 0 && g > 0)
    }
}
