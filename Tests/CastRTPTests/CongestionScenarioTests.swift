import Testing
import CastCore
import CastMedia
@testable import CastRTP

/// Whole-sender scenarios on the emulated link, with bounds like libwebrtc's
/// own goog_cc tests (issue 14 item 5). Each prints its figures for docs/rate-control.md.
@Suite struct CongestionScenarioTests {
    func mbps(_ v: Int64) -> String { String(Double(v / 10_000) / 100) }

    @Test func settlesNearTheCapacityOfASlowLinkAndFollowsItsChanges() throws {
        // 500 kbit/s, 100 ms one way → 450 ± 100 after 25 s; 800 → 750 ± 150; 100 kbit/s, 200 ms → 90 ± 25.
        var sim = try CallSimulation(configuration: CallSimulation.configuration(),
                                     link: LinkEmulator(bitsPerSecond: 500_000, buffer: .milliseconds(300), delay: .milliseconds(100)))
        try sim.run(until: seconds(25))
        let a = sim.meanTarget(from: seconds(22), to: seconds(25))
        try sim.run(until: seconds(50)) { link, _ in link.bitsPerSecond = 800_000 }
        let b = sim.meanTarget(from: seconds(47), to: seconds(50))
        try sim.run(until: seconds(75)) { link, _ in link.bitsPerSecond = 100_000; link.delay = .milliseconds(200) }
        let c = sim.meanTarget(from: seconds(72), to: seconds(75))
        print("slow link: 500k → \(a), 800k → \(b), 100k → \(c); skipped \(sim.framesSkipped), dropped \(sim.sender.statistics.framesDroppedByPacer), probes \(sim.sender.statistics.probesSent)")
        #expect(abs(a - 450_000) <= 100_000, "\(a)")
        #expect(abs(b - 750_000) <= 150_000, "\(b)")
        #expect(abs(c - 90_000) <= 25_000, "\(c)")
    }
}

extension CongestionScenarioTests {
    @Test func aStepDownDrainsTheQueueAndAStepUpIsFoundAgain() throws {
        // 4.4 → 1.5 → 4.4 Mbit/s (the cap is 4 Mbit/s), 200 ms buffer, 20 ms one way.
        var sim = try CallSimulation(configuration: CallSimulation.configuration(),
                                     link: LinkEmulator(bitsPerSecond: 4_400_000, buffer: .milliseconds(200), delay: .milliseconds(20)))
        try sim.run(until: seconds(60)) { link, now in
            link.bitsPerSecond = now < seconds(20) ? 4_400_000 : now < seconds(40) ? 1_500_000 : 4_400_000
        }
        let before = sim.meanTarget(from: seconds(15), to: seconds(20))
        let low = sim.meanTarget(from: seconds(30), to: seconds(40))
        let after = sim.meanTarget(from: seconds(49), to: seconds(50))
        // Queueing delay after the step down, per second: back under 50 ms within 5 s and staying there.
        let perSecond = (20..<40).map { s in sim.queueDelays(from: seconds(Double(s)), to: seconds(Double(s + 1))).quantile(0.5) }
        let settledAt = (0..<20).first { i in perSecond[i...].allSatisfy { $0 < .milliseconds(50) } }.map { $0 + 20 }
        let stepUpAt = (40..<60).first { s in sim.meanTarget(from: seconds(Double(s)), to: seconds(Double(s + 1))) >= 3_200_000 }
        print("steps: 4.4M → \(mbps(before)), 1.5M → \(mbps(low)), 4.4M → \(mbps(after)); queue medians after the drop (ms):",
              perSecond.map { $0.totalNanoseconds / 1_000_000 }, "settled at \(settledAt.map(String.init) ?? "never") s, 80 % at \(stepUpAt.map(String.init) ?? "never") s",
              "probes \(sim.sender.statistics.probesSent), dropped frames \(sim.sender.statistics.framesDroppedByPacer)")
        #expect(before >= 3_400_000, "\(before)")
        #expect(low >= 1_100_000 && low <= 1_600_000, "\(low)")
        #expect(perSecond.firstIndex { $0 < .milliseconds(50) }.map { $0 <= 5 } == true)   // within 5 s of the drop
        #expect(sim.queueDelays(from: seconds(25), to: seconds(40)).quantile(0.5) < .milliseconds(50))
        #expect(stepUpAt.map { $0 <= 50 } == true)
    }

    @Test func aSecondSmallerDropDoesNotMakeTheRecoveryForgetTheHigherRate() throws {
        // 4.4 → 1.5 → 0.7 → 4.4 Mbit/s: the second drop is large too (0.7 < 0.66 × 1.4), but the
        // rate to recover after the step up is still the 4 Mbit/s before the first one.
        var sim = try CallSimulation(configuration: CallSimulation.configuration(),
                                     link: LinkEmulator(bitsPerSecond: 4_400_000, buffer: .milliseconds(200), delay: .milliseconds(20)))
        try sim.run(until: seconds(60)) { link, now in
            link.bitsPerSecond = now < seconds(20) ? 4_400_000 : now < seconds(30) ? 1_500_000 : now < seconds(40) ? 700_000 : 4_400_000
        }
        let low = sim.meanTarget(from: seconds(35), to: seconds(40))
        let stepUpAt = (40..<60).first { s in sim.meanTarget(from: seconds(Double(s)), to: seconds(Double(s + 1))) >= 3_200_000 }
        print("second drop: 0.7M → \(mbps(low)), 80 % of the cap at \(stepUpAt.map(String.init) ?? "never") s")
        #expect(low <= 800_000, "\(low)")
        #expect(stepUpAt.map { $0 <= 50 } == true)   // within 10 s of the step up (without the memory: never in 20 s)
    }

    @Test func aSteady2MbitLinkSettlesWithoutLossOrRunaway() throws {
        var sim = try CallSimulation(configuration: CallSimulation.configuration(),
                                     link: LinkEmulator(bitsPerSecond: 2_000_000, buffer: .milliseconds(200), delay: .milliseconds(10)))
        try sim.run(until: seconds(60))
        let t = sim.targets(from: seconds(15), to: seconds(60))
        let delays = sim.queueDelays(from: seconds(15), to: seconds(60))
        let loss = Double(sim.link.droppedByBuffer) / Double(max(sim.link.packetsIn, 1))
        print("steady 2M: target \(mbps(t.min() ?? 0))–\(mbps(t.max() ?? 0)) mean \(mbps(sim.meanTarget(from: seconds(15), to: seconds(60)))),",
              "queue p50 \(delays.quantile(0.5)), p95 \(delays.quantile(0.95)), loss \(loss), skipped \(sim.framesSkipped), dropped \(sim.sender.statistics.framesDroppedByPacer)")
        // Band after 15 s: 1.2–2.2 Mbit/s (60–110 % of the link; the estimate counts what arrives,
        // headers included); never a runaway beyond it.
        #expect((t.min() ?? 0) >= 1_200_000)
        #expect((t.max() ?? .max) <= 2_200_000)
        #expect(loss <= 0.01)
        #expect(delays.quantile(0.5) < .milliseconds(30))
        #expect(delays.quantile(0.95) < .milliseconds(120))
    }

    @Test func aStillMinuteDoesNotCollapseTheEstimate() throws {
        var sim = try CallSimulation(configuration: CallSimulation.configuration(),
                                     link: LinkEmulator(bitsPerSecond: 3_000_000, buffer: .milliseconds(200), delay: .milliseconds(20)))
        // Busy for 15 s, then a still desktop (~250-byte frames: 60 kbit/s) for a minute, then busy again.
        sim.frameSize = { now in now >= seconds(15) && now < seconds(75) ? 250 : nil }
        try sim.run(until: seconds(75))
        let busy = sim.meanTarget(from: seconds(13), to: seconds(15))
        let still = sim.targets(from: seconds(15), to: seconds(75))
        try sim.run(until: seconds(77))
        let after = sim.meanTarget(from: seconds(75), to: seconds(77))
        print("still minute: busy \(mbps(busy)), still min \(mbps(still.min() ?? 0)) max \(mbps(still.max() ?? 0)), after \(mbps(after)),",
              "probes \(sim.sender.statistics.probesSent)")
        #expect(busy >= 2_000_000)
        #expect((still.min() ?? 0) >= busy * 8 / 10)
        // Busy again at the link's full rate: one over-use back-off (0.85 × acked) at most, not a collapse.
        #expect(after >= busy * 6 / 10)
        #expect(sim.sender.statistics.probesSent <= 40)   // ALR probes every 5 s (a pair of clusters each), not a chain
    }

    @Test func rembCapsTheEstimateOfAReceiverWithoutTransportCC() throws {
        // aiortc: REMB and RR, no transport-cc; its REMB says 700 kbit/s on a 4 Mbit/s path.
        var sim = try CallSimulation(configuration: CallSimulation.configuration(transportCC: false),
                                     link: LinkEmulator(bitsPerSecond: 4_000_000, delay: .milliseconds(20)),
                                     transportCC: false, remb: 700_000)
        try sim.run(until: seconds(10))
        let t = sim.targets(from: seconds(3), to: seconds(10))
        print("REMB 700k: target \(mbps(t.min() ?? 0))–\(mbps(t.max() ?? 0))")
        #expect(t.allSatisfy { $0 <= 700_000 } && (t.min() ?? 0) >= 600_000)
        // A higher REMB lets the loss-based rule climb towards it (8 %/s on each lossless RR).
        sim.receiver.remb = 3_000_000
        try sim.run(until: seconds(20))
        let later = sim.meanTarget(from: seconds(19), to: seconds(20))
        print("REMB 3M: target after 10 s \(mbps(later))")
        #expect(later > 1_000_000 && later <= 3_000_000)
    }

    @Test func heavyRandomLossKeepsRetransmissionsWithinTheBudget() throws {
        // 2 Mbit/s with 25 % random loss: the receiver NACKs a quarter of everything, again every RTT.
        var link = LinkEmulator(bitsPerSecond: 2_000_000, buffer: .milliseconds(200), delay: .milliseconds(20))
        link.randomLoss = 0.25
        var sim = try CallSimulation(configuration: CallSimulation.configuration(), link: link)
        try sim.run(until: seconds(20))
        let s = sim.sender.statistics
        // The budget: half the estimate over the run, plus one window's worth of slack.
        let estimateBits = sim.samples.reduce(0.0) { $0 + Double($1.estimate) * 0.1 }
        let maxEstimate = Double(sim.samples.map(\.estimate).max() ?? 0)
        print("25 % loss: rtx+copies \(Double(s.retransmissionBytesSent * 8) / 20 / 1e6) Mbit/s vs half the mean estimate \(0.5 * estimateBits / 20 / 1e6), nacks \(s.nacksReceived), ignored for budget \(s.nacksIgnoredForBudget), rtx \(s.retransmissionsSent), copies \(s.copiesSent), target end \(mbps(s.mediaTargetBitsPerSecond)), offered/link \(Double(s.bytesSent * 8) / 20 / 2_000_000)")
        #expect(s.nacksIgnoredForBudget > 0)
        // All that left (media, RTX, copies, probes) stays under the link rate on average: no multiplied load.
        #expect(Double(s.bytesSent * 8) / 20 <= 2_000_000 * 1.05)
        #expect(Double(s.retransmissionBytesSent * 8) <= 0.5 * estimateBits + 0.5 * maxEstimate)
        #expect(s.retransmissionBytesSent > 0)
    }

    @Test func lateButNotLostPacketsGetNoLossProtectionCopies() throws {
        // A lossless link whose jitter reorders packets by up to 30 ms: the receiver NACKs each
        // gap at once (webrtcbin's habit); transport-cc then shows the packets arrived.
        var link = LinkEmulator(bitsPerSecond: 20_000_000, buffer: .milliseconds(200), delay: .milliseconds(5))
        link.jitter = .milliseconds(30)
        var sim = try CallSimulation(configuration: CallSimulation.configuration(), link: link)
        try sim.run(until: seconds(20))
        let s = sim.sender.statistics
        print("late packets: nacks \(s.nacksReceived), late \(s.latePacketsReported), confirmed lost \(s.lossesConfirmed), copies \(s.copiesSent), rtx \(s.retransmissionsSent)")
        #expect(s.nacksReceived > 50)
        #expect(s.latePacketsReported > 50)
        #expect(s.lossesConfirmed == 0)
        #expect(s.copiesSent == 0)
    }

    @Test func twoPercentRandomLossDoesNotCollapseTheEstimate() throws {
        var link = LinkEmulator(bitsPerSecond: 2_000_000, buffer: .milliseconds(200), delay: .milliseconds(20))
        link.randomLoss = 0.02
        var sim = try CallSimulation(configuration: CallSimulation.configuration(), link: link)
        try sim.run(until: seconds(40))
        let t = sim.targets(from: seconds(20), to: seconds(40))
        print("2 % loss: target \(mbps(t.min() ?? 0))–\(mbps(t.max() ?? 0)) mean \(mbps(sim.meanTarget(from: seconds(20), to: seconds(40)))), copies \(sim.sender.statistics.copiesSent)")
        #expect(sim.meanTarget(from: seconds(20), to: seconds(40)) >= 1_000_000)
        #expect((t.min() ?? 0) >= 500_000)
    }

    @Test func fivePercentRandomLossOnAFastLinkKeepsTheCap() throws {
        // The fault row "Chromium receiver, 5% loss, busy 1080p screen": a link far above the 4 Mbit/s
        // cap, 20 ms one way with ±10 ms of jitter that keeps the order (the faults' router), 5 %
        // random loss, no congestion. GCC's loss bound holds between 2 and 10 % loss, so the target
        // should stay near the cap. Read over 20-packet windows (50 ms at the cap) the loss came out
        // above 10 % often enough that the bound was cut again and again: 2.52–3.9 Mbit/s, mean 3.37
        // here (2.3–3.2 for 40 s in the real row); over 500 ms windows 3.47–3.91, mean 3.73.
        var link = LinkEmulator(bitsPerSecond: 50_000_000, buffer: .milliseconds(200), delay: .milliseconds(20))
        link.randomLoss = 0.05
        link.jitter = .milliseconds(20)
        link.jitterKeepsOrder = true
        var sim = try CallSimulation(configuration: CallSimulation.configuration(), link: link)
        try sim.run(until: seconds(60))
        let t = sim.targets(from: seconds(10), to: seconds(60))
        let mean = sim.meanTarget(from: seconds(10), to: seconds(60))
        print("5 % loss, fast link: target \(mbps(t.min() ?? 0))–\(mbps(t.max() ?? 0)) mean \(mbps(mean))")
        #expect(mean >= 3_500_000, "\(mean)")
        #expect((t.min() ?? 0) >= 3_000_000, "\(t.min() ?? 0)")
    }

    @Test func crossTrafficLeavesItTheRest() throws {
        // 3 Mbit/s shared with a constant 1.5 Mbit/s flow (which does not back off).
        var link = LinkEmulator(bitsPerSecond: 3_000_000, buffer: .milliseconds(200), delay: .milliseconds(20))
        link.crossTrafficBitsPerSecond = 1_500_000
        func run(_ configuration: VideoSender.Configuration) throws -> (mean: Int64, queue: Duration) {
            var sim = try CallSimulation(configuration: configuration, link: link)
            try sim.run(until: seconds(30))
            return (sim.meanTarget(from: seconds(15), to: seconds(30)),
                    sim.queueDelays(from: seconds(15), to: seconds(30)).quantile(0.5))
        }
        let now = try run(CallSimulation.configuration())
        // The pacer's burst before issue 19 (20 ms of the pacing rate, at most 19.2 kB), on the same link.
        var old = CallSimulation.configuration()
        old.pacerBurstInterval = .milliseconds(20)
        old.pacer = .init(burstBytes: 19_200)
        let before = try run(old)
        print("cross traffic 1.5 of 3M: target mean \(mbps(now.mean)), queue p50 \(now.queue) "
              + "(20 ms burst: \(mbps(before.mean)), \(before.queue))")
        #expect(now.mean >= 900_000 && now.mean <= 1_600_000, "\(now.mean)")
        #expect(now.queue < .milliseconds(60))
        #expect(now.queue < before.queue + .milliseconds(5))
    }
}

extension CongestionScenarioTests {
    @Test func aTokenBucketStepKeepsTheRateNearTheLinkAfterRecoveryProbes() throws {
        // The fault set's 8 → 1.5 → 8 Mbit/s row in small: tc tbf (a 5 KB bucket, a 200 ms
        // queue) on the router's tun device, which counts the 28 bytes of IPv4 and UDP that
        // castd's sizes leave out, and fewer, larger frames as the rate falls. The model's
        // encoder meets every target exactly, so it does not show the real row's saw-tooth
        // (aRecoveryProbeRaises… and anOverUseSoonAfter… in SendSideBandwidthEstimatorTests
        // hold its two causes); it holds the rate near the link and the step up within 10 s.
        var link = LinkEmulator(bitsPerSecond: 8_000_000, buffer: .milliseconds(200), delay: .milliseconds(1))
        link.perPacketOverhead = 28
        link.bucketBytes = 5_000
        var sim = try CallSimulation(configuration: CallSimulation.configuration(), link: link)
        // castd's frame-rate ladder at 1080p (RateLadder.standardSteps): fewer, larger frames.
        sim.frameRate = { t in t >= 2_600_000 ? 30 : t >= 1_500_000 ? 20 : t >= 1_100_000 ? 15 : t >= 600_000 ? 10 : 5 }
        try sim.run(until: seconds(60)) { link, now in
            link.bitsPerSecond = now < seconds(20) ? 8_000_000 : now < seconds(40) ? 1_500_000 : 8_000_000
        }
        let low = sim.targets(from: seconds(25), to: seconds(40))
        let mean = sim.meanTarget(from: seconds(25), to: seconds(40))
        let stepUpAt = (40..<60).first { s in sim.meanTarget(from: seconds(Double(s)), to: seconds(Double(s + 1))) >= 3_200_000 }
        let delays = sim.queueDelays(from: seconds(25), to: seconds(40))
        print("tbf steps: 1.5M → mean \(mbps(mean)), min \(mbps(low.min() ?? 0)), below 0.9M \(low.filter { $0 < 900_000 }.count) of \(low.count) samples;",
              "queue p50 \(delays.quantile(0.5)), p95 \(delays.quantile(0.95)); 80 % of the cap at \(stepUpAt.map(String.init) ?? "never") s; probes \(sim.sender.statistics.probesSent)")
        #expect(mean >= 1_100_000, "\(mean)")
        #expect(stepUpAt.map { $0 <= 50 } == true)
    }
}

extension CongestionScenarioTests {
    /// What one fall in capacity did to the frames: captured from `at` to the next change.
    struct Fall: CustomStringConvertible {
        var at: Double
        var to: Int64
        /// Seconds from the fall until every later frame of the segment took under the bound.
        var drainedAfter: Double?
        /// The slowest frame captured from one second after the fall to the next change.
        var worstAfterOneSecond: Duration
        /// The longest time between two frames' arrivals in the segment (a frozen picture).
        var longestGap: Duration
        var description: String {
            "\(at) s → \(Double(to / 10_000) / 100)M: drained after \(drainedAfter.map { String(format: "%.2f s", $0) } ?? "never"), "
                + "worst after 1 s \(worstAfterOneSecond.totalNanoseconds / 1_000_000) ms, longest gap \(longestGap.totalNanoseconds / 1_000_000) ms"
        }
    }

    /// Runs a link schedule (capacity from each start time on) and judges every fall in it.
    func falls(_ schedule: [(at: Double, bitsPerSecond: Int64)], until end: Double, bound: Duration) throws -> [Fall] {
        var sim = try CallSimulation(configuration: CallSimulation.configuration(),
                                     link: LinkEmulator(bitsPerSecond: schedule[0].bitsPerSecond, buffer: .milliseconds(200),
                                                        delay: .milliseconds(20)))
        try sim.run(until: seconds(end)) { link, now in
            link.bitsPerSecond = schedule.last { seconds($0.at) <= now }!.bitsPerSecond
        }
        var result: [Fall] = []
        for (i, step) in schedule.enumerated() where i > 0 && step.bitsPerSecond < schedule[i - 1].bitsPerSecond {
            let next = i + 1 < schedule.count ? schedule[i + 1].at : end
            let frames = sim.frameDelays(from: seconds(step.at), to: seconds(next))
            // The frame after the last slow one (the first frame if none was slow; none if the last one was).
            let drained: Instant? = switch frames.lastIndex(where: { $0.delay >= bound }) {
            case nil: frames.first?.captured
            case let i?: i + 1 < frames.count ? frames[i + 1].captured : nil
            }
            let arrivals = frames.map { $0.captured + $0.delay }.sorted()
            result.append(Fall(at: step.at, to: step.bitsPerSecond,
                               drainedAfter: drained.map { Double(($0 - seconds(step.at)).totalNanoseconds) / 1e9 },
                               worstAfterOneSecond: frames.filter { $0.captured >= seconds(step.at + 1) }.map(\.delay).max() ?? .zero,
                               longestGap: zip(arrivals, arrivals.dropFirst()).map { $1 - $0 }.max() ?? .zero))
        }
        return result
    }

    @Test func everySharpFallDrainsWithinASecondAlsoWhenTheyRepeat() throws {
        // Capture to arrival under 80 ms leaves the ~16 ms that encode and decode take on a free
        // link: glass to glass under 100 ms. At 4.4 Mbit/s until the estimate reaches the 4 Mbit/s
        // cap, then a fall to 1.2 Mbit/s every 6 s (3 s down, 3 s up), then one from a long
        // stretch at the cap to 1 Mbit/s and a second fall, 1.5 → 0.7, from an already low rate.
        var schedule: [(at: Double, bitsPerSecond: Int64)] = [(0, 4_400_000)]
        for k in 0..<5 { schedule += [(15 + 6 * Double(k), 1_200_000), (18 + 6 * Double(k), 4_400_000)] }
        schedule += [(55, 1_000_000), (60, 4_400_000), (75, 1_500_000), (80, 700_000), (85, 4_400_000)]
        let result = try falls(schedule, until: 88, bound: .milliseconds(80))
        print("falls (bound 80 ms):\n  " + result.map(\.description).joined(separator: "\n  "))
        #expect(result.count == 8)
        for f in result { #expect(f.longestGap < .milliseconds(1000), "\(f)") }
        // The falls to 1.2 Mbit/s, the first from the cap and the four repeated ones from
        // 1.5–1.8 Mbit/s, meet the goal: the sender drains after an over-use in a sharp fall (the
        // estimate backs off from the delivery rate, the pacer paces at the estimate) and after
        // one that finds a queue of 100 ms grown within a second from under 25 ms while packets
        // arrive at under 0.9 × the acknowledged rate of when the queue was short (the repeated
        // falls, too shallow to count as sharp, drained in 1.40–1.47 s without it and had frames
        // at 117–614 ms a second after).
        for f in result.prefix(5) {
            #expect(f.drainedAfter.map { $0 <= 1.0 } == true, "\(f)")
            #expect(f.worstAfterOneSecond < .milliseconds(80), "\(f)")
        }
        // Not met yet by the other three. They empty their queue in the first second too, but
        // seconds later, with the estimate back at the link (at 1.0 and 1.5 Mbit/s ~1 % past it),
        // single frames take 105–111 ms, each next to a recovery probe (2 × the rate for 15 ms,
        // every 2 s) on a link at capacity (docs/rate-control.md). A known issue until it is met.
        withKnownIssue("after the falls to 1.0, 1.5 and 0.7 Mbit/s single frames at a recovery probe still take 105–111 ms, not under 80") {
            for f in result.dropFirst(5) {
                #expect(f.drainedAfter.map { $0 <= 1.0 } == true, "\(f)")
                #expect(f.worstAfterOneSecond < .milliseconds(80), "\(f)")
            }
        }
    }
}

extension CongestionScenarioTests {
    /// The quick fault row "Chromium receiver, 5% loss for 20 s" in small: a cheap picture
    /// (~70 kbit/s of colour bars) on a fast path with 5 % loss and 20 ms of order-keeping
    /// jitter, application-limited far below the estimate.
    func cheapPictureOnALossyPath() throws -> CallSimulation {
        var link = LinkEmulator(bitsPerSecond: 50_000_000, buffer: .milliseconds(200), delay: .milliseconds(20))
        link.randomLoss = 0.05
        link.jitter = .milliseconds(20)
        link.jitterKeepsOrder = true
        var sim = try CallSimulation(configuration: CallSimulation.configuration(), link: link)
        sim.frameSize = { _ in 290 }
        return sim
    }

    @Test func aDropWhileApplicationLimitedIsProbedBackAtOnce() throws {
        // A receiver short of CPU (CI's loaded machine): for half a second its packets arrive
        // later and later (20 → 220 ms one way), then all at once. To the sender that is a link
        // slower than the picture, and it drains to the few packets that got through (the
        // 50 kbit/s floor). The evidence came from a cheap picture's few packets, so once the
        // over-use has been quiet for a second one probe goes straight to 0.85 × the rate before
        // the drop. Without it the target stayed under 0.2 Mbit/s for ten seconds here, and the
        // real row sat at 5 fps as long.
        var sim = try cheapPictureOnALossyPath()
        try sim.run(until: seconds(10))
        let before = sim.meanTarget(from: seconds(8), to: seconds(10))
        try sim.run(until: seconds(20)) { link, now in
            let t = (now - seconds(10)).seconds
            link.delay = t >= 0 && t < 0.5 ? .milliseconds(20 + Int64(t * 400)) : .milliseconds(20)
        }
        let during = sim.targets(from: seconds(10), to: seconds(12))
        let back = sim.samples.first { $0.at >= seconds(10.5) && $0.target >= before / 2 }?.at
        let after = sim.targets(from: seconds(13), to: seconds(20))
        print("ALR drop: before \(mbps(before)), low \(mbps(during.min() ?? 0)), back over half at \(back.map { "\($0)" } ?? "never"),",
              "13–20 s \(mbps(after.min() ?? 0))–\(mbps(after.max() ?? 0)), probes \(sim.sender.statistics.probesSent)")
        #expect(before >= 3_000_000, "\(before)")
        #expect((during.min() ?? .max) < before / 4)   // the stall did cut: else the test shows nothing
        #expect(back.map { $0 <= seconds(12.5) } == true)
        #expect((after.min() ?? 0) >= before / 2, "\(after.min() ?? 0)")
    }

    @Test func aFallBelowAnApplicationLimitedPicturesRateIsFollowed() throws {
        // The other side of the rule above: the link really falls, to 300 kbit/s, under a
        // picture of ~600 kbit/s that was application-limited on a 4 Mbit/s path. The target
        // must go below the link within two seconds, however it backs off in ALR.
        var sim = try CallSimulation(configuration: CallSimulation.configuration(),
                                     link: LinkEmulator(bitsPerSecond: 50_000_000, buffer: .milliseconds(200), delay: .milliseconds(20)))
        sim.frameSize = { now in now < seconds(10) ? 2_500 : nil }
        try sim.run(until: seconds(14)) { link, now in
            link.bitsPerSecond = now < seconds(10) ? 50_000_000 : 300_000
        }
        let before = sim.meanTarget(from: seconds(8), to: seconds(10))
        let after = sim.targets(from: seconds(12), to: seconds(14))
        print("ALR then a fall to 0.3M: before \(mbps(before)), 2–4 s after \(mbps(after.min() ?? 0))–\(mbps(after.max() ?? 0))")
        #expect(before >= 3_000_000, "\(before)")
        #expect((after.max() ?? .max) <= 300_000, "\(after.max() ?? 0)")
    }
}

extension CongestionScenarioTests {
    /// A picture that needs 4 KB a frame whatever the frame rate (slides with small changes) on
    /// a link of 3 Mbit/s that falls to 0.8 for 20 s and comes back; `ladder` true: castd's
    /// RateLadder, fed the last second's output; false: its thresholds alone.
    func cheapPictureThroughAFall(ladder: Bool) throws -> CallSimulation {
        var sim = try CallSimulation(configuration: CallSimulation.configuration(),
                                     link: LinkEmulator(bitsPerSecond: 3_000_000, buffer: .milliseconds(200), delay: .milliseconds(20)))
        if ladder {
            sim.ladder = RateLadder(size: FrameSize(width: 1920, height: 1080), maxFrameRate: 30, maxBitrate: 4_000_000)
        } else {
            sim.frameRate = { t in t >= 2_600_000 ? 30 : t >= 1_500_000 ? 20 : t >= 1_100_000 ? 15 : t >= 600_000 ? 10 : 5 }
        }
        sim.pictureBytesPerFrame = 4_000
        try sim.run(until: seconds(80)) { link, now in
            link.bitsPerSecond = now >= seconds(20) && now < seconds(40) ? 800_000 : 3_000_000
        }
        return sim
    }

    @Test func aCheapPictureFindsTheLinkAgainAfterAFall() throws {
        // The meeting row (10 min, full fault set) stayed at 10 fps for minutes on a 3 Mbit/s link,
        // application-limited at ~460 kbit/s under a 954 kbit/s target: the thresholds gave 10 fps,
        // the picture at 10 fps sent under 65 % of the target, and an application-limited stream's
        // estimate may not climb past 1.5 × what it acknowledges; only the periodic probes raised
        // it, 1.5× every 5 s. The ladder now climbs to the step the picture fits under the target.
        var runs: [(name: String, back: Int?, lowFPS: Double, lowQueue: Duration, end: Int64)] = []
        for ladder in [false, true] {
            let sim = try cheapPictureThroughAFall(ladder: ladder)
            let back = (40..<80).first { s in sim.meanTarget(from: seconds(Double(s)), to: seconds(Double(s + 1))) >= 2_400_000 }
            let low = sim.samples.filter { $0.at >= seconds(30) && $0.at < seconds(40) }
            runs.append((ladder ? "RateLadder" : "thresholds alone", back,
                         Double(low.reduce(0) { $0 + $1.frameRate }) / Double(max(low.count, 1)),
                         sim.queueDelays(from: seconds(30), to: seconds(40)).quantile(0.95),
                         sim.meanTarget(from: seconds(70), to: seconds(80))))
        }
        for r in runs {
            print("cheap picture, 3 → 0.8 → 3 Mbit/s, \(r.name): 30–40 s \(r.lowFPS) fps, queue p95 \(r.lowQueue);",
                  "over 2.4 Mbit/s again at \(r.back.map(String.init) ?? "never") s, 70–80 s \(mbps(r.end))")
        }
        let (thresholds, withLadder) = (runs[0], runs[1])
        // On the slow link the picture (4 KB frames) fits 0.8 Mbit/s at up to 20 fps: more frames
        // than the thresholds give, and no standing queue for them.
        #expect(withLadder.lowFPS > thresholds.lowFPS)
        #expect(withLadder.lowQueue < .milliseconds(60), "\(withLadder.lowQueue)")
        #expect(withLadder.back.map { $0 <= 50 } == true)
        #expect(withLadder.end >= 2_400_000, "\(withLadder.end)")
    }
}

extension CongestionScenarioTests {
    /// The quality table's 1 Mbit/s cells in small: tc tbf (a 5 KB bucket, a 200 ms queue, the
    /// 28 bytes of IPv4 and UDP counted) and a cheap picture (a slide: a keyframe, then 1.5 KB
    /// frames), with castd's frame-rate ladder.
    func startThroughATokenBucket(bitsPerSecond: Int64, delay: Duration, seed: UInt64) throws -> CallSimulation {
        var link = LinkEmulator(bitsPerSecond: bitsPerSecond, buffer: .milliseconds(200), delay: delay, seed: seed)
        link.perPacketOverhead = 28
        link.bucketBytes = 5_000
        var sim = try CallSimulation(configuration: CallSimulation.configuration(), link: link, seed: seed)
        sim.ladder = RateLadder(size: FrameSize(width: 1920, height: 1080), maxFrameRate: 30, maxBitrate: 4_000_000)
        sim.pictureBytesPerFrame = 1_500
        try sim.run(until: seconds(12))
        return sim
    }

    @Test(arguments: [1_000_000, 2_000_000] as [Int64])
    func aTokenBucketDoesNotFoolTheProbes(bitsPerSecond: Int64) throws {
        // tbf's bucket passes its first 5 KB at line rate, and a probe cluster of 5 packets is
        // hardly more: the 3× start probe read 3.2 Mbit/s on the real 1 Mbit/s link, the target
        // jumped to the 4 Mbit/s cap, the 200 ms queue overflowed (40–55 % loss), and the drain
        // and the loss-based cut left a slide at 0.2–0.3 Mbit/s and 5 fps. Each probe is now a
        // pair of clusters back to back, and a saturated reading of the second is the answer.
        for (delay, seed) in [(Duration.milliseconds(1), UInt64(3)), (.milliseconds(20), 5), (.milliseconds(1), 7)] {
            let sim = try startThroughATokenBucket(bitsPerSecond: bitsPerSecond, delay: delay, seed: seed)
            let early = sim.targets(from: .zero, to: seconds(3))
            let later = sim.targets(from: seconds(3), to: seconds(12))
            print("start through a \(mbps(bitsPerSecond))M tbf, \(delay) one way: 0–3 s \(mbps(early.min() ?? 0))–\(mbps(early.max() ?? 0)),",
                  "3–12 s \(mbps(later.min() ?? 0))–\(mbps(later.max() ?? 0)); dropped by the queue \(sim.link.droppedByBuffer)",
                  "of \(sim.link.packetsIn); probe clusters \(sim.sender.statistics.probesSent)")
            // The start probes did find the link (the picture alone, application-limited, cannot).
            #expect((early.max() ?? 0) >= bitsPerSecond * 8 / 10, "\(early.max() ?? 0)")
            #expect((early.max() ?? .max) <= bitsPerSecond * 5 / 4, "\(early.max() ?? 0)")
            // The periodic probes of an application-limited picture (every 5 s, at twice the
            // rate) are held to 1.5 × the rate (`laterProbeRaiseLimit`): a bucket refilled over
            // the quiet spell still passes part of the pair at line rate.
            #expect((later.max() ?? .max) <= bitsPerSecond * 3 / 2, "\(later.max() ?? 0)")
            #expect((later.min() ?? 0) >= bitsPerSecond * 7 / 10, "\(later.min() ?? 0)")
            #expect(sim.link.droppedByBuffer == 0)
        }
    }
}

extension CongestionScenarioTests {
    @Test func aTokenBucketStillFoolsTheStartOnALongerPath() throws {
        // The same 2 Mbit/s tbf start with the path's one-way delay at 25–31 ms (a sweep of 1–40 ms
        // on the fake clock: every delay from 22 to 40 ms read high, none under). Two causes, from
        // the estimator's readings: the feedback splits the second cluster, the pair is read at its
        // 80 % point before the bucket's share of it is seen, and the start chains a further probe
        // at the cap whose first packets pass the refilled bucket unsaturated (25 ms); or the
        // pacing turn between the two clusters is long enough for the bucket to refill, and the
        // second passes at line rate too (31 ms). Reading a start cluster only once it is whole
        // and over its later half fixed both, but broke the starts on a jittery lossy path
        // (5 % loss, 20 ms jitter: 3.6 → 1.4 Mbit/s); not kept (docs/rate-control.md).
        for delay in [25, 28, 31] as [Int64] {
            let sim = try startThroughATokenBucket(bitsPerSecond: 2_000_000, delay: .milliseconds(delay), seed: 3)
            let settled = sim.targets(from: seconds(0.6), to: seconds(3))
            print("start through a 2.0M tbf, \(delay) ms one way: 0.6–3 s \(mbps(settled.min() ?? 0))–\(mbps(settled.max() ?? 0))")
            withKnownIssue("a 2 Mbit/s tbf start reads 2.6–4.0 Mbit/s when the path's one-way delay is 22–40 ms") {
                #expect((settled.max() ?? .max) <= 2_500_000, "\(delay) ms: \(settled.max() ?? 0)")
            }
        }
    }
}

extension CongestionScenarioTests {
    /// The cast beside a bulk TCP download (`LinkEmulator.BulkFlow`) on a 2 Mbit/s link with a
    /// 200 ms drop-tail buffer: the cast's mean target and the download's rate over 25–65 s.
    func besideABulkDownload(sharedLinkShare: Double) throws -> (cast: Int64, tcp: Int64, queue: Duration) {
        var configuration = CallSimulation.configuration()
        configuration.congestion.sharedLinkShare = sharedLinkShare
        var link = LinkEmulator(bitsPerSecond: 2_000_000, buffer: .milliseconds(200), delay: .milliseconds(5))
        link.bulk = .init(startsAt: seconds(5))
        var sim = try CallSimulation(configuration: configuration, link: link)
        try sim.run(until: seconds(65))
        if sharedLinkShare > 0 {
            // From four seconds after the download's queue has stood (it starts at 5 s) the floor holds.
            let shared = sim.samples.filter { $0.at >= seconds(12) }
            #expect(shared.allSatisfy { $0.sharedFloor != nil })
            // ... and the pacer sends near the target, not at 2.5 × it, into the other flow's full queue.
            #expect(shared.allSatisfy { Double($0.pacing) <= 1.25 * Double($0.estimate) })
        }
        return (sim.meanTarget(from: seconds(25), to: seconds(65)),
                sim.link.bulk!.bitsPerSecond(from: seconds(25), to: seconds(65)),
                sim.queueDelays(from: seconds(25), to: seconds(65)).quantile(0.5))
    }

    @Test func aBulkDownloadBesideLeavesEachAThirdOfTheLink() throws {
        // A delay-based controller yields to a flow that fills the buffer whatever it sends, one
        // over-use cut after another: the plain yield (no floor) is shown beside, as a reference.
        let now = try besideABulkDownload(sharedLinkShare: SendSideBandwidthEstimator.Configuration().sharedLinkShare)
        let plain = try besideABulkDownload(sharedLinkShare: 0)
        print("beside a bulk download, 2M: cast \(mbps(now.cast)), download \(mbps(now.tcp)), queue p50 \(now.queue) "
              + "(no floor: cast \(mbps(plain.cast)), download \(mbps(plain.tcp)))")
        #expect(now.cast >= 2_000_000 / 3, "\(now.cast)")
        #expect(now.tcp >= 2_000_000 / 3, "\(now.tcp)")
        #expect(plain.cast < now.cast)
    }

    @Test func theFloorFollowsASharedLinkThatFallsAndEndsWithTheDownload() throws {
        // 2 Mbit/s shared with a bulk download from 5 s; at 30 s the link falls to 0.6 Mbit/s
        // (under the floor the cast kept: 0.4 × 2); at 50 s the download ends.
        var link = LinkEmulator(bitsPerSecond: 2_000_000, buffer: .milliseconds(200), delay: .milliseconds(5))
        link.bulk = .init(startsAt: seconds(5), endsAt: seconds(50))
        var sim = try CallSimulation(configuration: CallSimulation.configuration(), link: link)
        try sim.run(until: seconds(80)) { link, now in
            if now >= seconds(30), link.bitsPerSecond != 600_000 { link.bitsPerSecond = 600_000 }
        }
        let fallen = sim.meanTarget(from: seconds(40), to: seconds(50))
        let after = sim.queueDelays(from: seconds(65), to: seconds(80)).quantile(0.5)
        let afterTarget = sim.meanTarget(from: seconds(65), to: seconds(80))
        print("shared link falling to 0.6M: cast \(mbps(fallen)) at 40–50 s; download gone: cast \(mbps(afterTarget)), queue p50 \(after)")
        // The remembered link (2 Mbit/s) no longer holds the cast over the fallen one...
        #expect(fallen < 600_000, "\(fallen)")
        // ... and once the download has gone the cast has the link, with its queue its own again.
        #expect(afterTarget >= 450_000, "\(afterTarget)")
        #expect(after < .milliseconds(50), "\(after)")
    }

    @Test func aLinkTheCastHasAloneIsNeverTakenForAShared() throws {
        // Its own queues: the repeated sharp falls (each a standing queue until the drain), and the
        // busy picture through a 1 Mbit/s tbf link whose frames the ladder makes large.
        var schedule: [(at: Double, bitsPerSecond: Int64)] = [(0, 4_400_000)]
        for k in 0..<5 { schedule += [(15 + 6 * Double(k), 1_200_000), (18 + 6 * Double(k), 4_400_000)] }
        var falling = try CallSimulation(configuration: CallSimulation.configuration(),
                                         link: LinkEmulator(bitsPerSecond: 4_400_000, buffer: .milliseconds(200), delay: .milliseconds(20)))
        try falling.run(until: seconds(48)) { link, now in
            link.bitsPerSecond = schedule.last { seconds($0.at) <= now }!.bitsPerSecond
        }
        var link = LinkEmulator(bitsPerSecond: 1_000_000, buffer: .milliseconds(200), delay: .milliseconds(5))
        link.perPacketOverhead = 28
        link.bucketBytes = 5_000
        var busy = try CallSimulation(configuration: CallSimulation.configuration(), link: link)
        busy.ladder = RateLadder(size: FrameSize(width: 1920, height: 1080), maxFrameRate: 30, maxBitrate: 4_000_000)
        try busy.run(until: seconds(40))
        for sim in [falling, busy] {
            #expect(!sim.samples.isEmpty)
            #expect(sim.samples.allSatisfy { $0.sharedFloor == nil }, "\(sim.samples.first { $0.sharedFloor != nil }?.at as Any)")
        }
    }
}
