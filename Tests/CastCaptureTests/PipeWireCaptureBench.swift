import BenchSupport
import Testing
import Foundation
import CastCore
import CastSystem
import CastMedia
@testable import CastCapture

/// PipeWire capture at 1080p30 against a real daemon: the pattern producer (in
/// this process) sends BGRx frames in MemFd buffers; PipeWireSource copies each
/// into a ring slot and an "encoder" reads every frame. Reports the process
/// callback's time (dequeue, copy, metadata, publish) and what arrived.
@Suite(.serialized, .enabled(if: Bench.enabled && PipeWireSession.installed, "a benchmark: CASTD_BENCH=1"))
struct PipeWireCaptureBench {
    @Test func capture1080p30() throws {
        let session = try PipeWireSession()
        defer { session.stop() }
        let size = FrameSize(width: 1920, height: 1080)
        let producer = try PipeWirePatternProducer(remote: session.remote, options: .init(size: size, fps: 30, cursor: true))
        defer { producer.stop() }
        let src = try PipeWireSource(options: .init(remote: session.remote, node: try producer.nodeId()))
        guard case .frame = nextFrame(src) else { Issue.record("no frame"); return }
        let clock = SystemMonotonicClock()
        let before = Bench.usage(), sent0 = producer.framesSent, published0 = src.ring.stats.published
        let start = clock.now()
        var frames = 0
        while (clock.now() - start).seconds < 10 {
            if case .frame = src.capture(onlyIfChanged: true), let r = src.ring.takeNewest() {
                frames += 1
                src.ring.finishRead(r)
            }
        }
        let wall = (clock.now() - start).seconds
        let after = Bench.usage()
        Bench.emit([
            "bench": "pipewire_capture", "size": "\(size)", "seconds": (wall * 10).rounded() / 10,
            "frames_sent": producer.framesSent - sent0, "frames_published": src.ring.stats.published - published0,
            "frames_read": frames, "ring_dropped": src.ring.stats.dropped,
            "process_callback_ms": Bench.percentiles(src.processNanos),
            "cpu_percent_of_one_core_producer_and_consumer": ((after.cpu - before.cpu) / wall * 1000).rounded() / 10,
            "max_rss_mib": (after.maxRSSMiB * 10).rounded() / 10,
        ])
        #expect(frames > 0)
    }
}
