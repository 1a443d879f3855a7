import Testing
import CastCore
@testable import CastRTP

/// The burst rule (issue 19): 30 ms of the pacing rate (libwebrtc: 40), at most 63,000 bytes.
@Suite struct PacerBurstTests {
    typealias Config = Pacer<Int>.Configuration

    @Test func theBurstIs30msOfThePacingRateBetweenTwoPacketsAnd63000Bytes() {
        #expect(Config.bursting(bitsPerSecond: 10_000_000).burstBytes == 37_500)   // 4 Mbit/s × 2.5
        #expect(Config.bursting(bitsPerSecond: 10_000_000).bitsPerSecond == 10_000_000)
        #expect(Config.bursting(bitsPerSecond: 80_000_000).burstBytes == 63_000)
        #expect(Config.bursting(bitsPerSecond: 200_000).burstBytes == 2_400)
        #expect(Config.bursting(bitsPerSecond: 10_000_000, maxBurstBytes: 19_200).burstBytes == 19_200)
        #expect(Config.bursting(bitsPerSecond: 10_000_000, interval: .milliseconds(20)).burstBytes == 25_000)
    }

    @Test func extremeInputsNeitherTrapNorLeaveTheBounds() {
        let big = Config.bursting(bitsPerSecond: .max, interval: .seconds(1_000_000), maxBurstBytes: .max)
        #expect(big.bitsPerSecond == 8_000_000_000 && big.burstBytes == 1_000_000_000)
        let none = Config.bursting(bitsPerSecond: -5, interval: .seconds(-1), maxBurstBytes: -1)
        #expect(none.bitsPerSecond == 8_000 && none.burstBytes == 1)
    }

    /// Sends `frames` frames of `size` bytes in 1200-byte packets, one every `interval`;
    /// returns, per frame, how long after its arrival its last packet left.
    func lastPacketDelays(_ config: Config, frames: Int, size: Int, interval: Duration) -> [Duration] {
        var p = Pacer<Int>(configuration: config)
        var delays: [Duration] = []
        var now = ms(1_000)
        for f in 0..<frames {
            let arrival = ms(1_000) + interval * f
            now = max(now, arrival)
            let packets = (size + 1199) / 1200
            for i in 0..<packets { p.enqueue(f * 1000 + i, size: min(1200, size - i * 1200)) }
            var last: Instant?
            while last == nil {
                let out = p.poll(now: now)
                if out.contains(f * 1000 + packets - 1) { last = now; break }
                guard let d = p.nextDeadline else { break }
                now = max(now, d)
            }
            delays.append((last ?? now) - arrival)
        }
        return delays
    }

    @Test func aFrameOfAFrameIntervalsWorthLeavesAtOnceWhereThe20msCapSpreadIt() {
        // 1080p busy at 4 Mbit/s, 30 fps: ~17 kB a frame, 25 kB for a larger one; paced at 10 Mbit/s.
        let bursting = Config.bursting(bitsPerSecond: 10_000_000)
        let before = Config(bitsPerSecond: 10_000_000, burstBytes: 19_200)   // the old rule: 20 ms capped at 16 packets
        for size in [17_000, 25_000, 30_000] {
            let now = lastPacketDelays(bursting, frames: 30, size: size, interval: .milliseconds(33))
            #expect(now.allSatisfy { $0 == .zero }, "\(size): \(now)")
            if size > 19_200 {
                let old = lastPacketDelays(before, frames: 30, size: size, interval: .milliseconds(33))
                #expect(old.allSatisfy { $0 > .milliseconds(3) }, "\(size): \(old)")   // 25 kB: 3.8 ms
            }
        }
    }

    @Test func theSustainedRateStaysThePacingRate() {
        // 60 kB frames every 33 ms offer 14.5 Mbit/s to a 10 Mbit/s pacer: the queue grows, and
        // over a second no more than the rate plus one burst leaves.
        var p = Pacer<Int>(configuration: .bursting(bitsPerSecond: 10_000_000))
        var sent = 0
        var now = ms(0)
        var next = 0
        while now < ms(1_000) {
            if now >= ms(Int64(next) * 33) {
                for i in 0..<50 { p.enqueue(next * 100 + i, size: 1200) }
                next += 1
            }
            sent += p.poll(now: now).count * 1200
            let frameDue = ms(Int64(next) * 33)
            now = min(p.nextDeadline ?? frameDue, frameDue)
        }
        #expect(sent <= 1_250_000 + 50_000 + 1200)
        #expect(sent >= 1_250_000 - 2 * 1200)
        #expect(p.queuedBytes > 0)
    }
}
