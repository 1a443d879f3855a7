import CastCore

/// The send-side bandwidth estimate (Google Congestion Control,
/// draft-ietf-rmcat-gcc-02, with libwebrtc goog_cc's choices where the draft
/// leaves room): what the encoder should produce and how fast the pacer should
/// drain, from transport-cc feedback, REMB and receiver reports.
///
/// It keeps the one sans-IO contract (`SansIO` in CastCore):
///
///     estimator.handle(input, now: now)        // a sent packet, feedback, a report, a ceiling
///     while let out = estimator.poll() { … }   // .target(RateTarget) when it changed, .probe(ProbeCluster)
///     estimator.nextDeadline()                 // call handleTimeout(now:) then (early calls are harmless)
///
/// Time only arrives as `now`; nothing here reads a clock, sleeps or does IO.
///
/// How the pieces combine: the delay-based estimate (`DelayBasedDetector` →
/// `AimdRateControl`, fed by `AcknowledgedBitrate`) once transport-cc feedback
/// arrives, the loss-based bound (`LossBasedControl`, from transport-cc losses,
/// or from RR fraction lost when there is no transport-cc), and the receiver's
/// REMB: the target is the least of them, kept within
/// [`minimumBitrate`, the owner's maximum]. Probes (`ProbeCluster`) are asked
/// for at start (3× and 6× the start rate, gcc's "fast start"), periodically
/// while the stream is application-limited, and after a large drop while the
/// estimate is below the rate before it; a probe's measured rate raises the
/// estimate at once. While application-limited the estimate neither grows
/// beyond 1.5 × what is acknowledged nor decays for lack of traffic.
/// After an over-use or a high-loss reading it drains the bottleneck's queue
/// (`RateTarget.draining`): target and pacing below the delivery rate, the pacer
/// at the target, until `QueueingDelay` reads the queue empty. While a queue stands that
/// another flow holds (a bulk TCP download on the same link), the estimate keeps a share of the
/// link's rate, paces near the target and does not drain (`sharedLinkFloor`).
public struct SendSideBandwidthEstimator: Sendable, SansIO {
    public struct Configuration: Sendable, Equatable {
        public var startBitrate: Int64
        public var minimumBitrate: Int64
        public var maximumBitrate: Int64
        /// Pacing rate = target × this, so a keyframe drains quickly (libwebrtc kDefaultPaceMultiplier 2.5).
        public var pacingFactor: Double
        /// Whether to ask for probes (pointless without transport-cc feedback or a way to send padding).
        public var probing: Bool
        /// The share of the link's rate the estimate keeps while a queue it did not build stands
        /// (`sharedLinkFloor`); 0: none, a delay-based controller's plain yield.
        public var sharedLinkShare: Double

        /// No estimate goes above 10 Gbit/s, whatever the owner says (keeps every product finite).
        public static let absoluteMaximum: Int64 = 10_000_000_000

        /// Start at 1 Mbit/s; 50 kbit/s floor; 4 Mbit/s ceiling (spec §7 maxBitrateBps at 1080p).
        public init(startBitrate: Int64 = 1_000_000, minimumBitrate: Int64 = 50_000, maximumBitrate: Int64 = 4_000_000,
                    pacingFactor: Double = 2.5, probing: Bool = true, sharedLinkShare: Double = 0.4) {
            self.minimumBitrate = min(max(10_000, minimumBitrate), Self.absoluteMaximum)
            self.maximumBitrate = min(max(self.minimumBitrate, maximumBitrate), Self.absoluteMaximum)
            self.startBitrate = min(max(startBitrate, self.minimumBitrate), self.maximumBitrate)
            self.pacingFactor = pacingFactor.isFinite ? min(max(1, pacingFactor), 10) : 2.5
            self.probing = probing
            self.sharedLinkShare = sharedLinkShare.isFinite ? min(max(0, sharedLinkShare), 0.5) : 0
        }
    }

    /// What the estimate says now.
    public struct RateTarget: Equatable, Sendable {
        /// What the encoder should produce (media only).
        public var bitsPerSecond: Int64
        /// What the pacer may send at.
        public var pacingBitsPerSecond: Int64
        public var usage: BandwidthUsage
        public var applicationLimited: Bool
        /// The latest acknowledged (received) rate, from transport-cc.
        public var acknowledgedBitsPerSecond: Int64?
        public var roundTripTime: Duration?
        /// The latest loss reading (transport-cc or RR), 0…1.
        public var lossFraction: Double
        /// Set from an over-use or a high-loss reading until the bottleneck's queue has
        /// drained: the target is then below the delivery rate, and the pacer sends at it, not `pacingFactor` × it.
        public var draining = false
        /// For the controller's trace only.
        public var trace = Trace()

        /// The bottleneck's queueing delay and the rate the last feedback's packets arrived at,
        /// when known. Every two compare equal, so a new reading alone is no new target.
        public struct Trace: Equatable, Sendable {
            public var queueingDelayMs: Double?
            public var deliveryBitsPerSecond: Int64?
            /// The least the estimate goes to while the link is shared (`sharedLinkFloor`), when it is.
            public var sharedLinkFloorBitsPerSecond: Int64?

            public static func == (_: Trace, _: Trace) -> Bool { true }
        }
    }

    public enum Input: Sendable {
        /// A packet left (media, retransmission, copy or probe padding): its
        /// transport-wide sequence number when it carries one, size on the wire.
        case packetSent(transportSequenceNumber: UInt16?, size: Int, probeCluster: Int?)
        case transportFeedback(TransportCCFeedback)
        case remb(bitsPerSecond: UInt64)
        case receiverReport(fractionLost: Double, roundTripTime: Duration?)
        case maximumBitrate(Int64)
    }

    public enum Output: Equatable, Sendable {
        case target(RateTarget)
        case probe(ProbeCluster)
    }

    /// Probes: 3× then 6× the start rate (libwebrtc ProbeController first/second
    /// exponential probe scale); at least 5 packets and 15 ms of the rate
    /// (kMinProbePacketsSent, kMinProbeDurationMs); further probes at 2× a result
    /// that reached 70 % of its probe; every 5 s at 2× while application-limited
    /// (kAlrPeriodicProbingInterval, alr_probe_scale).
    static let startProbeScales = [3.0, 6.0]
    static let probeMinPackets = 5
    static let probeDuration = 0.015
    /// How long the clusters of one probe wait for each other's readings (a cluster spans at
    /// most 1 s, `ProbeResultEstimator.maxSpanMs`).
    static let probeGroupTime = Duration.seconds(1)
    /// A probe none of whose clusters has been read by then is forgotten.
    static let unreadProbeTime = Duration.seconds(10)
    static let furtherProbeShare = 0.7
    static let probeScale = 2.0
    static let periodicProbeInterval = Duration.seconds(5)
    /// A drop below 66 % of the rate before it is "large" (libwebrtc kBitrateDropThreshold).
    static let largeDropRatio = 0.66
    /// A drop is measured from the highest rate of this window.
    static let dropWindow = Duration.seconds(5)
    /// Recovery probes after a large drop: only after 1 s free of over-use and
    /// loss, for 60 s at most. (Our choice: libwebrtc probes once on ALR end; a
    /// screen cast is rarely application-limited while busy, and without a probe
    /// AIMD alone needs ~12 s to climb 1.5 → 4 Mbit/s.)
    static let recoveryQuietTime = Duration.seconds(1)
    /// How far one probe after the start-up ones may raise the estimate: a token-bucket
    /// shaper (tc tbf, many access links) passes a short cluster at line rate after a
    /// quiet spell, so its measured rate can be several times the path's; on the real
    /// bottleneck (Scripts/bench --bottleneck, a 5 KB bucket) unbounded results made the
    /// estimate saw-tooth between 4 Mbit/s and 0.85 × a low acknowledged rate on a
    /// 1.5 Mbit/s link. 1.5× per probe still climbs 1.5 → 4 Mbit/s in three probes.
    static let laterProbeRaiseLimit = 1.5
    /// A later probe raises at most 10 % past the known link capacity (see `laterProbeLimit`).
    static let capacityProbeMargin = 1.1
    static let recoveryWindow = Duration.seconds(60)
    /// After a large drop that came while application-limited (or within `alrRecentTime` of
    /// it), one probe at this share of the rate before the drop, whose result may raise the
    /// estimate up to its own rate (libwebrtc probes so after a large drop in or just after ALR,
    /// kProbeFractionAfterDrop). There the drop's evidence is a small stream's: a cheap
    /// picture's few packets that a receiver short of CPU read late look like a link far slower
    /// than it is, and the drain backs off to them. The usual recovery probes (2× every 2 s,
    /// raising 1.5× at a time, only after a second without loss over 10 %, which a few packets
    /// on a link with 5 % random loss rarely give) took the quick fault row "Chromium receiver,
    /// 5% loss" from the 50 kbit/s floor at 5 fps for ten seconds and more.
    static let alrRecoveryShare = 0.85
    static let alrRecentTime = Duration.seconds(3)
    /// Recovery probes are 15 ms bursts: every 2 s costs little queueing while the link stays low.
    static let recoveryProbeInterval = Duration.seconds(2)
    /// Periodic processing, for ALR and probe timers (libwebrtc process interval is 25 ms;
    /// nothing here needs finer than 100 ms).
    static let processInterval = Duration.milliseconds(100)
    /// A missing packet counts as lost once one sent this much later arrived
    /// (max(50 ms, RTT/2); see `reorderWindow`).
    static let minimumReorderWindow = Duration.milliseconds(50)
    /// Pacing while draining: the estimate itself. At 2.5 × it the pacer let retransmissions
    /// and a keyframe into a link just found too slow at up to 2.5 × its rate, and its
    /// 200 ms buffer overflowed again (CongestionScenarioTests, the repeated sharp falls).
    static let drainPacingFactor = 1.0
    /// The queue counts as drained under this much queueing delay (the simulated 1.2 Mbit/s
    /// link's steady queue is ~15 ms; a frame at it takes ~25 ms).
    static let drainedQueueDelayMs = 25.0
    /// A fall is sharp when packets arrive at under this share of the estimate (after the
    /// over-use cut, which leaves it at 0.85 × the acknowledged rate): on a steady link they
    /// arrive above it, and a drain there only cost frames (the real 2 Mbit/s tbf row).
    static let sharpFallRatio = 0.8
    /// A queue this long is standing: the link was busy through the last feedback's span.
    static let standingQueueDelayMs = 50.0
    /// A queue this deep, grown from under `drainedQueueDelayMs` within `suddenQueueTime`, is
    /// drained at an over-use however sharp the fall: the link fell under the rate just now,
    /// if by less than `sharpFallRatio` (4.4 → 1.2 Mbit/s with the estimate at 1.5 after an
    /// earlier fall). Left to AIMD's cut to 0.85 × the acknowledged rate, such a queue took
    /// 1.4 s to drain and frames a second after the fall 117–614 ms (CongestionScenarioTests,
    /// the repeated falls). A queue that built up over seconds (cross traffic's) is not, nor
    /// one the link delivers at over `suddenFallRatio` × the acknowledged rate of when the
    /// queue was short: the link did not fall, the queue is a burst of ours (a keyframe, any
    /// frame on a slow link) or an estimate that climbed past the link. Without this the real 1 and 2 Mbit/s tbf links drained every
    /// 6–8 s at 1.17–1.19 × an unchanged link, and the 1 Mbit/s row lost frames to it.
    static let deepQueueDelayMs = 100.0
    static let suddenQueueTime = Duration.seconds(1)
    static let suddenFallRatio = 0.9
    /// Draining ends after this at the latest: a queue that does not fall is not ours to drain.
    static let maximumDrainTime = Duration.seconds(2)
    /// While draining, target and pacing are the delivery rate less what empties the queue in
    /// `drainTime`, between `drainShareRange` of it: the estimate itself lags the fall (0.85 ×
    /// an acknowledged rate that moves a few per cent a window), and pacing at an estimate still
    /// 40 % above the link kept its 200 ms buffer full for a second after the over-use.
    static let drainTimeMs = 400.0
    static let drainShareRange = 0.5...0.95
    /// A queue that has stood over `standingQueueDelayMs` against the last minute's base for
    /// every packet of every feedback (`QueueingDelay.takeLeastStanding`) for this long, never under `drainedQueueDelayMs`, is held by
    /// another flow: a queue of ours empties within a second or two of an over-use (the cut to
    /// 0.85 × what arrives, or the drain), and a bulk TCP flow's stays for as long as it sends.
    /// From then, and for `sharedLinkMemory` after the last such reading, the estimate keeps at
    /// least `Configuration.sharedLinkShare` × the link's rate (`sharedLinkFloor`). Not 2 s: the
    /// start on the real 1 Mbit/s tbf link (an estimate 20 % over the link until its first
    /// over-use) kept a queue of its own for 3.1 s.
    static let sharedQueueTime = Duration.seconds(4)
    static let sharedLinkMemory = Duration.seconds(5)
    /// The link's rate is the highest of what was acknowledged and what arrived under a standing
    /// queue in this window (both at most the link's rate); held while the link is shared, when
    /// what arrives is only our share of it.
    static let linkRateWindow = Duration.seconds(30)
    /// Pacing while the link is shared: near the target. The other flow keeps the queue near full,
    /// and a frame let in at 2.5 × the target arrives as a burst that a near-full drop-tail queue
    /// drops the tail of, where the other flow's ack-clocked packets come one by one.
    static let sharedPacingFactor = 1.2
    /// Two high-loss readings this close are one loss that lasts (`noteSharedLink`).
    static let sharedLossRepeat = Duration.milliseconds(1200)

    public private(set) var configuration: Configuration
    private var detector = DelayBasedDetector()
    private var aimd: AimdRateControl
    private var acked = AcknowledgedBitrate()
    private var loss: LossBasedControl
    private var alr = ApplicationLimitDetector()
    private var log = SentPacketLog()
    private var probes = ProbeResultEstimator()
    private var queue = QueueingDelay()
    /// Since when the pacer paces at the estimate (see `RateTarget.draining`).
    private var drainingSince: Instant?
    /// When the last drain ended (or now, while one lasts): losses since were congestion's.
    public var lastDrainAt: Instant? { drainingSince != nil ? lastProcess : drainEndedAt }
    private var drainEndedAt: Instant?
    /// When feedback last showed a queue under `drainedQueueDelayMs`, and the acknowledged rate then.
    private var shortQueueAt: Instant?
    private var ackedWhenShort: Double?
    /// The rate at which the last feedback's packets arrived (bits per second).
    private var deliveryRate: Double?
    /// The link's rate (`linkRateWindow`): rates in decreasing order, a sliding maximum.
    private var linkRates: [(rate: Double, at: Instant)] = []
    /// Until when the link counts as shared with a flow that holds its queue (`sharedQueueTime`).
    private var sharedUntil: Instant?
    /// When feedback last showed a packet under `drainedQueueDelayMs` over the last minute's base.
    private var shortStandingAt: Instant?
    /// The last high-loss reading before this feedback's.
    private var highLossBefore: Instant?
    private var firstFeedbackAt: Instant?
    private var remb: Double?
    private var rtt: Duration?
    /// Whether transport-cc feedback has arrived (then RR loss and NACKs are not the loss signal).
    public private(set) var hasTransportFeedback = false
    private var lastTarget: RateTarget?
    private var outputs: [Output] = []
    private var outputHead = 0
    private var lastProcess: Instant?
    private var nextProbeID = 1
    private var startProbesSent = false
    /// The probes asked, each one cluster or a pair read as one (`ProbeGroup`, `probeResult`).
    private var probeGroups: [ProbeGroup] = []
    /// A drop (its time) that came while application-limited, until its recovery probe is sent.
    private var alrDropToProbe: Instant?
    private var lastProbeAt: Instant?
    private var lastProbeRate = 0.0
    private var lastOveruseAt: Instant?
    private var lastHighLossAt: Instant?
    private var beforeDrop: (rate: Double, at: Instant)?
    /// The rates of the last `dropWindow`, in decreasing order (a sliding maximum).
    private var recentRates: [(rate: Double, at: Instant)] = []
    public private(set) var probesRequested = 0
    public private(set) var lossesConfirmed = 0
    public private(set) var lateReports = 0

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        aimd = AimdRateControl(start: Double(configuration.startBitrate))
        loss = LossBasedControl(start: Double(configuration.startBitrate))
    }

    /// The reordering window for loss evidence: max(50 ms, RTT/2). A packet that
    /// late is useless to a 30 fps jitter buffer anyway; shorter would count
    /// GStreamer's 2–30 ms late packets as lost.
    public var reorderWindow: Duration {
        guard let r = rtt else { return Self.minimumReorderWindow }
        return max(Self.minimumReorderWindow, r / 2)
    }

    public var roundTripTime: Duration? { rtt }
    public var target: RateTarget { lastTarget ?? makeTarget() }
    public func nextDeadline() -> Instant? { (lastProcess ?? .zero) + Self.processInterval }
    public var usage: BandwidthUsage { detector.state }

    public mutating func handle(_ input: Input, now: Instant) {
        switch input {
        case .packetSent(let seq, let size, let cluster):
            if let s = seq { log.sent(s, size: size, probeCluster: cluster, at: now) }
            let wasLimited = alr.isLimited
            alr.update(sentBytes: size, target: currentRate, now: now)
            if wasLimited, !alr.isLimited { acked.expectFastRateChange() }
            if !startProbesSent { startProbes(now: now) }
        case .transportFeedback(let fb):
            feedback(fb, now: now)
        case .remb(let bps):
            let value = Double(min(bps, UInt64(Int64.max)))
            // A receiver's estimate of an application-limited stream follows what it receives
            // (aiortc's REMB sits near 1.5 × the incoming rate): it says nothing about capacity,
            // so while we are application-limited one below the current rate is ignored; else a
            // still screen's 30–60 kbit/s would become the cap, and the pacer (2.5 × the target)
            // would then take seconds over the next keyframe (seen: 13.9 s to recover from a 4 s cut).
            if alr.isLimited, value < currentRate { break }
            remb = value
        case .receiverReport(let fraction, let r):
            if let r, r >= .zero { rtt = r }
            // With transport-cc its losses are the finer reading; RR only for REMB-only receivers (aiortc).
            if !hasTransportFeedback, fraction.isFinite {
                loss.reading(fraction, target: currentRate, rtt: rtt ?? .milliseconds(100), now: now)
                if fraction > LossBasedControl.highLoss { lastHighLossAt = now }
            }
        case .maximumBitrate(let bps):
            configuration.maximumBitrate = min(max(configuration.minimumBitrate, bps), Configuration.absoluteMaximum)
        }
        process(now: now)
    }

    /// The periodic processing (every `processInterval`); an early call only processes early.
    public mutating func handleTimeout(now: Instant) { process(now: now) }

    public mutating func poll() -> Output? {
        guard outputHead < outputs.count else {
            if !outputs.isEmpty { outputs.removeAll(keepingCapacity: true); outputHead = 0 }
            return nil
        }
        defer { outputHead += 1 }
        return outputs[outputHead]
    }

    // MARK: Internals

    private var bounds: ClosedRange<Double> {
        Double(configuration.minimumBitrate)...Double(configuration.maximumBitrate)
    }

    /// The least of the delay-based estimate (once there is feedback), the loss bound and REMB.
    private var currentRate: Double {
        var r = loss.bound
        if hasTransportFeedback { r = min(r, aimd.bitrate) }
        if let remb { r = min(r, remb) }
        guard r.isFinite else { return bounds.lowerBound }   // never expected; never a trap either
        return min(max(r, bounds.lowerBound), bounds.upperBound)
    }

    private mutating func feedback(_ fb: TransportCCFeedback, now: Instant) {
        hasTransportFeedback = true
        if firstFeedbackAt == nil { firstFeedbackAt = now }
        let (received, lost, late) = log.feedback(fb, reorderWindow: reorderWindow)
        lossesConfirmed += lost
        lateReports += late
        // Each cluster's reading in this feedback (`ProbeResultEstimator.Reading.keeping`).
        var readings: [Int: ProbeResultEstimator.Reading] = [:]
        for m in received {
            let sendMs = Double(m.sentAt.nanoseconds) / 1e6
            _ = detector.packet(sendMs: sendMs, arrivalMs: m.arrivalMs, size: m.size)
            acked.acknowledged(bytes: m.size, arrivalMs: m.arrivalMs, applicationLimited: alr.isLimited)
            queue.arrived(sentAt: m.sentAt, arrivalMs: m.arrivalMs)
            if let id = m.probeCluster,
               let r = probes.acknowledged(cluster: id, sentAt: m.sentAt, size: m.size, arrivalMs: m.arrivalMs) {
                readings[id] = readings[id].map { $0.keeping(r) } ?? r
            }
        }
        let result = probeResult(readings, now: now)
        let probeRate = result?.reading.bitsPerSecond
        let probeIsStartup = result?.kind == .startup
        let probeIsALRRecovery = result?.kind == .alrRecovery
        let burstSeen = probeIsStartup && result?.burstSeen == true
        var freshDelivery: Double?
        if let first = received.first, let last = received.last, last.arrivalMs - first.arrivalMs >= 20 {
            let bytes = received.dropFirst().reduce(0) { $0 + $1.size }
            deliveryRate = Double(bytes) * 8_000 / (last.arrivalMs - first.arrivalMs)
            freshDelivery = deliveryRate
        }
        if detector.state == .overusing { lastOveruseAt = now }
        if loss.packets(lost: lost, expected: lost + received.count, target: currentRate,
                        rtt: rtt ?? .milliseconds(100), now: now),
           loss.lastLossFraction > LossBasedControl.highLoss {
            lastHighLossAt = now
        }
        noteSharedLink(freshDelivery, now: now)
        if let p0 = probeRate, detector.state != .overusing {
            let p = probeIsStartup ? p0 : probeIsALRRecovery ? min(p0, capacityProbeLimit) : min(p0, laterProbeLimit)
            let rate = min(p, bounds.upperBound)
            let raised = rate > 1.1 * aimd.bitrate
            // A saturated reading after a burst allowance (`probeResult`) is the path's capacity
            // (libwebrtc sets its estimate to any probe result): it may lower the estimate.
            if rate > aimd.bitrate || burstSeen { aimd.set(max(rate, bounds.lowerBound), now: now) }
            loss.raise(to: rate)
            // The send rate is about to jump to the new estimate, and the acknowledged rate
            // lags a jump by seconds (its Bayesian blend moves a few per cent per window when
            // the sample is far off): an over-use soon after would cut to 0.85 × the old rate.
            // On the real 1.5 Mbit/s tbf step recovery probes raised ~0.9 → 1.4 Mbit/s, the
            // link then over-used, and the cut went to 0.45–0.65 Mbit/s (5–10 fps). As at the
            // end of an application-limited spell, the next window is the new estimate.
            if raised, !alr.isLimited { acked.expectFastRateChange() }
            // A start-up probe that got through and raised the estimate asks for the next, twice
            // as fast (libwebrtc's exponential start); later probes do not chain.
            if raised, probeIsStartup, !burstSeen, p >= Self.furtherProbeShare * lastProbeRate, lastProbeRate > 0,
               rate < bounds.upperBound, let last = lastProbeAt, now - last < .seconds(2) {
                lastProbeRate = 0   // once per probe
                requestProbe(at: Self.probeScale * p, kind: .startup, now: now)
            }
        }
        let reduceAllowed = aimd.lastDecrease.map { now - $0 >= min(max(rtt ?? .milliseconds(100), .milliseconds(10)), .milliseconds(200)) } ?? true
        // Far above what is acknowledged, an over-use may cut at every feedback (the link fell
        // under the estimate), but not while application-limited: there the acknowledged rate
        // is the picture's, and each feedback's cut would take the estimate down to it.
        let farAboveAcked = !alr.isLimited && aimd.bitrate > 2 * (acked.bitsPerSecond ?? .infinity)
        if detector.state != .overusing || reduceAllowed || farAboveAcked {
            aimd.update(detector.state, acked: acked.bitsPerSecond, applicationLimited: alr.isLimited,
                        rtt: rtt ?? .milliseconds(100), bounds: bounds, now: now)
        }
        if let floor = sharedLinkFloor(now: now) {
            if aimd.bitrate < floor { aimd.set(floor, now: now) }
            if lastHighLossAt != now { loss.raise(to: floor) }
        }
        updateDraining(now: now)
    }

    /// The link's rate from this feedback, and whether its queue has stood long enough to be
    /// another flow's (`sharedQueueTime`).
    private mutating func noteSharedLink(_ delivery: Double?, now: Instant) {
        let shared = isShared(now: now)
        if let a = acked.bitsPerSecond, !alr.isLimited { noteLinkRate(a, now: now) }
        if let d = delivery, (queue.current ?? 0) >= Self.standingQueueDelayMs { noteLinkRate(d, now: now) }
        if !shared {
            while let first = linkRates.first, now - first.at >= Self.linkRateWindow { linkRates.removeFirst() }
        } else if lastHighLossAt == now {
            // Losses over 10 % in two readings running while shared: the link may be slower than
            // remembered (a floor over it keeps its queue full and loses packets every reading).
            // One such reading alone is the other flow's overflow, which it backs off from.
            if let before = highLossBefore, now - before <= Self.sharedLossRepeat {
                for i in linkRates.indices { linkRates[i].rate *= 1 - 0.5 * loss.lastLossFraction }
            }
        }
        if lastHighLossAt == now { highLossBefore = now }
        // The least delay of this feedback's packets: the latest one alone finds a queue of our
        // own whenever a frame takes about a frame interval to cross the link (the busy picture at
        // 1 Mbit/s, frames of 100 ms at 10 fps), which empties only before the next frame.
        guard let least = queue.takeLeastStanding() else { return }
        if least < Self.drainedQueueDelayMs { shortStandingAt = now }
        if least >= Self.standingQueueDelayMs, let short = shortStandingAt ?? firstFeedbackAt,
           now - short >= Self.sharedQueueTime {
            sharedUntil = now + Self.sharedLinkMemory
        }
    }

    /// Whether the link counts as shared with a flow that holds its queue (`sharedQueueTime`).
    private func isShared(now: Instant) -> Bool { sharedUntil.map { now < $0 } ?? false }

    private mutating func noteLinkRate(_ rate: Double, now: Instant) {
        while let last = linkRates.last, last.rate <= rate { linkRates.removeLast() }
        linkRates.append((rate, now))
    }

    /// The least the estimate goes to while the link is shared with a flow that holds its queue
    /// (a bulk TCP download beside the cast): `sharedLinkShare` × the link's rate. Delay-based
    /// control yields to such a flow without end, since the queue rises whatever it sends: beside
    /// a cubic download on the real 2 Mbit/s tbf link castd fell to 0.22 Mbit/s (11 %), its
    /// additive climb near the last over-use's rate (4 kbit/s a second) no match for one cut
    /// after another. Below the link's rate the floor cannot be what builds a queue.
    private func sharedLinkFloor(now: Instant) -> Double? {
        guard configuration.sharedLinkShare > 0, isShared(now: now), let link = linkRates.first?.rate else { return nil }
        return min(max(configuration.sharedLinkShare * link, bounds.lowerBound), bounds.upperBound)
    }

    /// Draining starts at an over-use or a high-loss reading with a standing queue (the link
    /// is slower than what was sent, and its queue is full) in a sharp fall, or with a sudden
    /// deep queue (`deepQueueDelayMs`), and ends once the queueing delay is back under
    /// `drainedQueueDelayMs` with no over-use, or after `maximumDrainTime`.
    private mutating func updateDraining(now: Instant) {
        let congested = detector.state == .overusing || lastHighLossAt == now
        // Only a standing queue in a sharp fall, or a sudden deep one, is drained: the small
        // over-uses of a steady link (AIMD finding its rate again) are left to AIMD, or each
        // would cost frames (the real 2 Mbit/s tbf row).
        let sharpFall = deliveryRate.map { $0 < Self.sharpFallRatio * currentRate } ?? false
        let q = queue.current ?? 0
        if q < Self.drainedQueueDelayMs { shortQueueAt = now; ackedWhenShort = acked.bitsPerSecond }
        // ... and only when the link now delivers less than it carried while the queue was
        // short: a frame bigger than the link takes in a frame time (a keyframe, or any frame on
        // a slow link) queues as suddenly, and so does an estimate that climbed past a steady
        // link, but the link delivers those at the rate it carried all along.
        let linkFell = deliveryRate.flatMap { d in ackedWhenShort.map { d < Self.suddenFallRatio * $0 } } ?? false
        let suddenQueue = q >= Self.deepQueueDelayMs && shortQueueAt.map { now - $0 <= Self.suddenQueueTime } ?? false
            && linkFell
        // A queue another flow holds is not ours to drain (`sharedLinkFloor`).
        let shared = isShared(now: now)
        if shared, drainingSince != nil {
            drainingSince = nil
            drainEndedAt = now
        } else if !shared, congested, (q >= Self.standingQueueDelayMs && sharpFall) || suddenQueue || drainingSince != nil {
            if drainingSince == nil { drainingSince = now }
            // With a standing queue the packets arrive at the link's rate: that, not the
            // acknowledged rate (which lags a fall by seconds), is what the estimate backs off
            // from. Else the estimate stays above the link once the queue is drained, and the
            // next frames fill it again.
            if let d = deliveryRate, (queue.current ?? 0) >= Self.standingQueueDelayMs, AimdRateControl.beta * d < aimd.bitrate {
                aimd.set(max(AimdRateControl.beta * d, bounds.lowerBound), now: now)
            }
        } else if let since = drainingSince,
                  (queue.current ?? 0) < Self.drainedQueueDelayMs || now - since >= Self.maximumDrainTime {
            drainingSince = nil
            drainEndedAt = now
        }
    }

    /// How far a probe after the start-up ones may raise the estimate: `laterProbeRaiseLimit`
    /// × the rate, and while the link's capacity is known (the acknowledged rate where it last
    /// over-used, see `AimdRateControl`) no more than `capacityProbeMargin` above it. A token
    /// bucket passes a short probe at line rate, so on the real 1.5 Mbit/s tbf step a recovery
    /// probe from 1.5 Mbit/s raised the estimate to 2.25: tbf's 200 ms queue overflowed, the
    /// receiver's NACKs took half the target for retransmissions, and the cast fell to 5 fps.
    /// A real step up is still found: once the estimate passes the capacity's ±3 σ band (by
    /// this raise, or by AIMD's additive climb after it when the band is wider than 10 %: low
    /// rates, a noisy link) AIMD forgets the capacity, and the next probe may go the full 1.5×.
    private var laterProbeLimit: Double { min(Self.laterProbeRaiseLimit * currentRate, capacityProbeLimit) }

    /// While the link's capacity is known, a probe after the start-up ones raises no more than
    /// `capacityProbeMargin` past it; the recovery probe after a drop in ALR is held to this alone
    /// (its drop did not come from the link: see `alrRecoveryShare`), so on a tbf link whose
    /// bucket passes the probe at line rate it does not jump past where the link over-used.
    private var capacityProbeLimit: Double {
        guard let c = aimd.capacity else { return .infinity }
        return max(Self.capacityProbeMargin * c, currentRate)
    }

    private mutating func process(now: Instant) {
        if let last = lastProcess, now < last { return }   // time never goes back here
        lastProcess = now
        alr.update(sentBytes: 0, target: currentRate, now: now)
        let rate = currentRate
        loss.targetApplied(rate, now: now)
        trackDrops(rate, now: now)
        periodicProbes(rate, now: now)
        let t = makeTarget()
        if t != lastTarget {
            lastTarget = t
            outputs.append(.target(t))
        }
    }

    private func makeTarget() -> RateTarget {
        let rate = currentRate
        let draining = drainingSince != nil
        var media = rate
        if draining, let d = deliveryRate {
            let share = min(max(1 - (queue.current ?? 0) / Self.drainTimeMs, Self.drainShareRange.lowerBound),
                            Self.drainShareRange.upperBound)
            media = min(rate, max(share * d, bounds.lowerBound))
        }
        let shared = lastProcess.map(isShared) ?? false
        let factor = draining ? Self.drainPacingFactor : shared ? Self.sharedPacingFactor : configuration.pacingFactor
        return RateTarget(bitsPerSecond: Int64(media), pacingBitsPerSecond: Int64(media * factor),
                          usage: detector.state, applicationLimited: alr.isLimited,
                          acknowledgedBitsPerSecond: acked.bitsPerSecond.map(Self.wholeBitsPerSecond),
                          roundTripTime: rtt, lossFraction: loss.lastLossFraction, draining: draining,
                          trace: .init(queueingDelayMs: queue.current, deliveryBitsPerSecond: deliveryRate.map(Self.wholeBitsPerSecond),
                                        sharedLinkFloorBitsPerSecond: lastProcess.flatMap(sharedLinkFloor).map(Self.wholeBitsPerSecond)))
    }

    /// A rate as whole bits per second, held to 0…10¹² so that no reading traps the conversion.
    private static func wholeBitsPerSecond(_ r: Double) -> Int64 {
        Int64(min(max(r, 0), 1e12))
    }

    private mutating func trackDrops(_ rate: Double, now: Instant) {
        // The highest rate of the last 5 s (a sliding maximum: the rates of the window in
        // decreasing order); a fall below 66 % of it is a large drop. One sample refreshed every
        // 5 s was not: a fall just after its refresh found the high already replaced by the fallen
        // rate, and the drop went unseen. A later, smaller drop (the estimate settling lower on
        // the slow link) does not replace the memory of a higher rate within the recovery window:
        // on the real 8 → 1.5 → 8 Mbit/s steps a second drop (1.4 → 0.66 Mbit/s) made 1.4 the
        // rate to recover, so after the step up no probe ran and AIMD alone took 10.2 s to reach
        // 80 % of the cap.
        while let last = recentRates.last, last.rate <= rate { recentRates.removeLast() }
        recentRates.append((rate, now))
        while let first = recentRates.first, now - first.at >= Self.dropWindow { recentRates.removeFirst() }
        guard let high = recentRates.first, rate < Self.largeDropRatio * high.rate else { return }
        if let d = beforeDrop, now - d.at <= Self.recoveryWindow, d.rate >= high.rate { return }
        beforeDrop = high
        if let l = alr.lastLimitedAt, now - l <= Self.alrRecentTime { alrDropToProbe = high.at }
    }

    private mutating func periodicProbes(_ rate: Double, now: Instant) {
        guard configuration.probing, hasTransportFeedback, rate < bounds.upperBound else { return }
        if let drop = beforeDrop, alrDropToProbe == drop.at, now - drop.at <= Self.recoveryWindow,
           rate < 0.9 * drop.rate, drainingSince == nil,
           // Quiet of over-use only: at a cheap picture's few packets a window's loss often reads
           // over 10 % on a link with 5 % random loss; one 15 ms probe costs little.
           lastOveruseAt.map({ now - $0 >= Self.recoveryQuietTime }) ?? true,
           lastProbeAt.map({ now - $0 >= Self.recoveryProbeInterval }) ?? true {
            alrDropToProbe = nil
            requestProbe(at: Self.alrRecoveryShare * drop.rate, kind: .alrRecovery, now: now)
            return
        }
        if alr.isLimited {
            if let last = lastProbeAt, now - last < Self.periodicProbeInterval { return }
            // A pair: the link was idle for seconds, so a token bucket in front of it is full.
            let r = Self.probeScale * rate
            requestProbe(at: [r, r], kind: .later, backToBack: true, now: now)
            return
        }
        if let last = lastProbeAt, now - last < Self.recoveryProbeInterval { return }
        guard let drop = beforeDrop, now - drop.at <= Self.recoveryWindow, rate < 0.9 * drop.rate else { return }
        // Not while draining: the probe would queue behind what the drain is emptying.
        guard quietSinceCongestion(now: now), drainingSince == nil else { return }
        requestProbe(at: min(Self.probeScale * rate, drop.rate), kind: .later, now: now)
    }

    /// No over-use and no high loss for `recoveryQuietTime`.
    private func quietSinceCongestion(now: Instant) -> Bool {
        [lastOveruseAt, lastHighLossAt].compactMap { $0 }.allSatisfy { now - $0 >= Self.recoveryQuietTime }
    }

    private mutating func startProbes(now: Instant) {
        startProbesSent = true
        guard configuration.probing else { return }
        let start = Double(configuration.startBitrate)
        requestProbe(at: Self.startProbeScales.map { $0 * start }, kind: .startup, now: now)
    }

    /// A probe: one cluster, or a pair read as one (`probeResult`): at the start
    /// `startProbeScales`, the second cluster at the next pacing turn (back to back, beside
    /// constant cross traffic the burst took more than its share of a FIFO and read high); the
    /// periodic probe of an application-limited stream twice at one rate, back to back
    /// (`ProbeCluster.followsPrevious`). The recovery probes after a drop stay single: the
    /// link is busy then, and a pair's queue would cost frames.
    struct ProbeGroup {
        enum Kind { case startup, alrRecovery, later }
        var ids: [Int]
        var kind: Kind
        var at: Instant
        var readings: [Int: ProbeResultEstimator.Reading] = [:]
        /// When its first reading came (the clusters may leave well after they were asked).
        var readAt: Instant?
    }

    /// The probes' result from this feedback's readings. A group is read once each of its
    /// clusters has a reading (or `probeGroupTime` has passed since its first): the highest reading,
    /// unless a later cluster came back saturated under an earlier one's. Then
    /// the earlier one went through a burst allowance and the saturated reading is the link's:
    /// a token bucket in front of the link (tc tbf's `burst`, any shaper's) passes the first
    /// cluster at line rate after a quiet spell, and the second finds it empty. The start probe
    /// at 3 Mbit/s read 3.2 on the real 1 Mbit/s tbf link, the target went to the 4 Mbit/s cap,
    /// and the 200 ms queue overflowed (40–55 % loss). A saturated reading over the earlier
    /// one's is jitter's (a 15 ms cluster stretched by the path) and is not taken.
    private mutating func probeResult(_ readings: [Int: ProbeResultEstimator.Reading], now: Instant)
        -> (reading: ProbeResultEstimator.Reading, kind: ProbeGroup.Kind, burstSeen: Bool)? {
        var result: (reading: ProbeResultEstimator.Reading, kind: ProbeGroup.Kind, burstSeen: Bool)?
        for i in probeGroups.indices {
            let fresh = readings.filter { probeGroups[i].ids.contains($0.key) }
            guard !fresh.isEmpty else { continue }
            probeGroups[i].readings.merge(fresh) { $0.keeping($1) }
            if probeGroups[i].readAt == nil { probeGroups[i].readAt = now }
            let g = probeGroups[i]
            guard g.readings.count == g.ids.count || g.readAt.map({ now - $0 >= Self.probeGroupTime }) == true else { continue }
            let inOrder = g.ids.compactMap { g.readings[$0] }
            var capped: ProbeResultEstimator.Reading?
            for (k, r) in inOrder.enumerated() where r.saturated && inOrder[..<k].contains(where: { $0.bitsPerSecond > r.bitsPerSecond }) {
                if r.bitsPerSecond < capped?.bitsPerSecond ?? .infinity { capped = r }
            }
            guard let r = capped ?? inOrder.max(by: { $0.bitsPerSecond < $1.bitsPerSecond }) else { continue }
            if result.map({ r.bitsPerSecond > $0.reading.bitsPerSecond }) ?? true { result = (r, g.kind, capped != nil) }
        }
        probeGroups.removeAll { g in g.readAt.map { now - $0 >= Self.probeGroupTime } ?? (now - g.at >= Self.unreadProbeTime) }
        return result
    }

    private mutating func requestProbe(at bps: Double, kind: ProbeGroup.Kind, now: Instant) {
        requestProbe(at: [bps], kind: kind, now: now)
    }

    /// `backToBack`: each cluster after the first follows it without a gap (`ProbeCluster.followsPrevious`).
    private mutating func requestProbe(at rates: [Double], kind: ProbeGroup.Kind, backToBack: Bool = false, now: Instant) {
        var ids: [Int] = []
        for bps in rates {
            let rate = min(bps, bounds.upperBound)
            guard rate > currentRate else { continue }
            let c = ProbeCluster(id: nextProbeID, bitsPerSecond: Int64(rate), minPackets: Self.probeMinPackets,
                                 minBytes: Int(rate * Self.probeDuration / 8), followsPrevious: backToBack && !ids.isEmpty)
            nextProbeID += 1
            lastProbeRate = rate
            probes.started(c)
            outputs.append(.probe(c))
            ids.append(c.id)
        }
        guard !ids.isEmpty else { return }
        probesRequested += 1
        lastProbeAt = now
        probeGroups.append(ProbeGroup(ids: ids, kind: kind, at: now))
        if probeGroups.count > 8 { probeGroups.removeFirst() }   // the estimator keeps 16 clusters
    }
}
