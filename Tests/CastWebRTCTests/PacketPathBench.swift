import AllocationCounter
import BenchSupport
import CastCore
import Foundation
import Testing
@testable import CastWebRTC
#if canImport(Glibc)
import Glibc
#endif

/// The packet path as the daemon runs it (issue 19): an encoded picture into a connected
/// `PeerSession` (packetizer, pacer, header extensions, history, SRTP), the transmits
/// drained as `DatagramDriver` drains them, each RTP datagram handed to `sendto` on a
/// loopback UDP socket. Time is a fake clock (the pacer's deadlines are met at once), so
/// what is measured is the work, not the waiting.
final class PacketPathRig {
    let harness: PeerSessionConsentTests.Harness
    /// A loopback UDP socket that receives nothing; `sink` is the one it sends to.
    private let fd: Int32
    private var sink = sockaddr_in()
    private let frameInterval = Duration.milliseconds(33)
    private(set) var rtpPackets = 0

    /// A P-frame (one 8 kB slice, ~7 packets: ~2 Mbit/s at 30 fps, inside the pacing
    /// rate the start estimate gives without feedback) and a keyframe (SPS, PPS and a
    /// 40 kB IDR slice) once every 60 frames, in Annex B.
    static let pFrame = annexB([[0x41] + body(8_000, seed: 1)])
    static let keyframe = annexB([[0x67, 0x42, 0xe0, 0x1f, 0x8d, 0x68, 0x05, 0x00, 0x5b, 0xa1], [0x68, 0xce, 0x3c, 0x80],
                                  [0x65] + body(40_000, seed: 2)])

    /// Bytes without a zero, so no start code appears inside a NAL unit.
    static func body(_ count: Int, seed: UInt64) -> [UInt8] {
        var rng = SeededRandom(seed: seed)
        return (0..<count).map { _ in UInt8.random(in: 1...255, using: &rng) }
    }

    static func annexB(_ nals: [[UInt8]]) -> [UInt8] { nals.flatMap { [0, 0, 0, 1] + $0 } }

    /// A session connected to the test receiver (ICE and DTLS on the fake clock).
    init() throws {
        harness = try PeerSessionConsentTests.Harness()
        harness.run(until: harness.now + .seconds(8))
        guard harness.session.state == .connected else {
            throw CastError(.usage, "the bench's peer session did not connect (state \(harness.session.state))")
        }
        fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { throw CastError(.usage, "socket() failed") }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        a.sin_port = 0
        let bound = withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &sink) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        guard bound == 0, named == 0 else { close(fd); throw CastError(.usage, "binding the bench's loopback socket failed") }
    }

    deinit { close(fd) }

    /// Sends `frames` pictures at 30 fps of fake time, a keyframe every 60th.
    func run(frames: Int, send: Bool) {
        let h = harness
        for i in 0..<frames {
            let frameAt = h.now
            h.session.sendAccessUnit(i % 60 == 0 ? Self.keyframe : Self.pFrame, captureTime: frameAt, now: frameAt)
            flush(send: send)
            // The driver's turns until the next frame: every deadline met when it falls due.
            let next = frameAt + frameInterval
            var turns = 0
            while let d = h.session.nextDeadline(), d < next, turns < 10_000 {
                h.now = max(h.now, d)
                h.session.handleTimeout(now: h.now)
                flush(send: send)
                turns += 1
            }
            h.now = next
        }
    }

    /// What `DatagramDriver.flush` does (each RTP or RTCP datagram's bytes given back to the
    /// session after `sendto`), with the receiver answering ICE's consent checks.
    private func flush(send: Bool) {
        let h = harness
        var progress = true
        while progress {
            progress = false
            while let o = h.session.poll() {
                progress = true
                guard case .transmit(let t) = o else { continue }   // events: the driver hands them on
                switch PacketKind(classifying: t.bytes) {
                case .stun: h.peer.handle(ICETransmit(from: t.from, to: t.to, datagram: t.bytes))
                case .dtls: h.dtls.handle(.datagram(t.bytes), now: h.now)
                case .rtpOrRtcp:
                    if t.bytes.count > 1, !(192...223).contains(t.bytes[1]) { rtpPackets += 1 }
                    if send { sendToSink(t.bytes) }
                    h.session.recycle(t.bytes)   // as the driver gives the bytes back after `sendto`
                default: break
                }
            }
            while !h.peer.outbox.isEmpty {
                progress = true
                let t = h.peer.outbox.removeFirst()
                h.session.handle(.datagram(t.datagram, from: t.from, to: t.to), now: h.now)
            }
        }
    }

    private func sendToSink(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { buf in
            withUnsafePointer(to: &sink) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, buf.baseAddress, buf.count, Int32(MSG_DONTWAIT), $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
    }

    /// Runs `frames` pictures and measures them on this thread: RTP packets, heap
    /// allocations, and CPU time (this thread's, so other processes do not count).
    func measure(frames: Int, send: Bool) -> (packets: Int, allocations: UInt64, cpuSeconds: Double) {
        let packetsBefore = rtpPackets
        let cpuBefore = Self.threadCPUSeconds()
        let allocationsBefore = castd_allocations_on_this_thread()
        run(frames: frames, send: send)
        let allocations = castd_allocations_on_this_thread() - allocationsBefore
        return (rtpPackets - packetsBefore, allocations, Self.threadCPUSeconds() - cpuBefore)
    }

    static func threadCPUSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

/// Allocations per RTP packet and packets per CPU-second on the send path (issue 19).
/// A benchmark, not a test: `CASTD_BENCH=1 swift test --filter PacketPathBench`
/// (`-c release -Xswiftc -enable-testing` for figures worth quoting). One JSON line.
/// `CASTD_BENCH_TRACE=N` prints the call stacks of N allocations on the path first.
@Suite(.serialized, .enabled(if: Bench.enabled, "a benchmark: CASTD_BENCH=1 swift test --filter PacketPathBench"))
struct PacketPathBench {
    @Test func packetsPerCPUSecondAndAllocationsPerPacket() throws {
        let rig = try PacketPathRig()
        rig.run(frames: 150, send: true)   // warm-up: the history and the queues reach their size
        let frames = 30 * max(Bench.frames, 60)   // 4 500 pictures by default (150 s of fake time)
        if let n = ProcessInfo.processInfo.environment["CASTD_BENCH_TRACE"].flatMap(Int.init) {
            // Where the packet path allocates: the next n allocations' stacks on stderr.
            castd_trace_allocations_on_this_thread(Int32(n))
            rig.run(frames: 300, send: true)   // ten seconds: keyframes, reports and the paced turns
            castd_trace_allocations_on_this_thread(0)
        }
        let path = rig.measure(frames: frames, send: false)
        let sent = rig.measure(frames: frames, send: true)
        #expect(path.packets > frames && sent.packets > frames)
        let stats = rig.harness.session.statistics
        func rounded(_ x: Double, _ places: Double = 1000) -> Double { (x * places).rounded() / places }
        Bench.emit([
            "bench": "packet_path",
            "frames": frames,
            "packets": sent.packets,
            "allocations_per_packet": rounded(Double(sent.allocations) / Double(sent.packets)),
            "packets_per_cpu_second": Int(Double(sent.packets) / sent.cpuSeconds),
            "path_only_packets_per_cpu_second": Int(Double(path.packets) / path.cpuSeconds),
            "path_only_allocations_per_packet": rounded(Double(path.allocations) / Double(path.packets)),
            "frames_dropped_by_pacer": stats.video?.framesDroppedByPacer ?? -1,
            "srtp_errors": stats.srtpErrors,
        ])
    }
}
