import BenchSupport
import Testing
import Foundation
import CX11
import CastCore
import CastSystem
import CastMedia
@testable import CastCapture

/// The capture stage at 1080p under Xvfb: XShmGetImage into a ring slot plus
/// the cursor, for a static screen and a busy one (40 random rectangles drawn
/// by another client before every capture). Prints one JSON object per run.
@Suite(.serialized, .enabled(if: Bench.enabled && XvfbServer.installed, "a benchmark: run Scripts/bench-capture-encode"))
struct CaptureBench {
    @Test(arguments: ["static", "busy"])
    func capture(scenario: String) throws {
        let size = FrameSize(width: 1920, height: 1080)
        let x = try XvfbServer(width: size.width, height: size.height)
        defer { x.stop() }
        TestPattern.paint(display: x.display, size: size)
        let painter = XOpenDisplay(x.display)!
        defer { XCloseDisplay(painter) }
        let root = castd_x11_root_window(painter, castd_x11_default_screen(painter))
        let gc = XCreateGC(painter, root, 0, nil)!
        defer { XFreeGC(painter, gc) }
        let clock = SystemMonotonicClock()
        let source = try XShmSource(options: .init(display: x.display, cursor: true), clock: clock)
        var r: UInt32 = 0x2545_f491
        func rnd(_ n: Int) -> Int { r ^= r << 13; r ^= r >> 17; r ^= r << 5; return Int(r % UInt32(n)) }
        var times: [Int64] = [], damaged = 0
        let before = Bench.usage()
        let start = clock.now()
        for _ in 0..<Bench.frames {
            if scenario == "busy" {
                for _ in 0..<40 {
                    XSetForeground(painter, gc, UInt(rnd(0xffffff)))
                    XFillRectangle(painter, root, gc, Int32(rnd(1800)), Int32(rnd(1000)), UInt32(20 + rnd(300)), UInt32(10 + rnd(200)))
                }
                XSync(painter, 0)
            }
            let t0 = clock.now()
            let outcome = source.capture(onlyIfChanged: false)
            let t1 = clock.now()
            guard case .frame(let f) = outcome else { Issue.record("capture failed"); return }
            if f.hasChanges { damaged += 1 }
            times.append((t1 - t0).totalNanoseconds)
            if let read = source.ring.takeNewest() { source.ring.finishRead(read) }
        }
        let wall = (clock.now() - start).seconds
        let after = Bench.usage()
        Bench.emit([
            "bench": "capture", "size": "\(size)", "scenario": scenario, "frames": times.count,
            "frames_with_damage": damaged, "capture_ms": Bench.percentiles(times),
            "cpu_percent_of_one_core": ((after.cpu - before.cpu) / wall * 1000).rounded() / 10,
            "cpu_ms_per_frame": ((after.cpu - before.cpu) / Double(times.count) * 1e5).rounded() / 100,
            "max_rss_mib": (after.maxRSSMiB * 10).rounded() / 10,
        ])
        #expect(times.count == Bench.frames)
    }
}
