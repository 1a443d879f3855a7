import CastCore

/// The video send path in one visible place (pion's interceptor chain, without
/// goroutines): access units in → packetizer → pacer → header extensions →
/// history → RTP datagrams; RTCP in → retransmissions, keyframe requests,
/// bandwidth estimates and statistics. Transport-agnostic: bytes in, bytes
/// out; SRTP and ICE wrap it.
///
/// It keeps the one sans-IO contract (`SansIO` in CastCore): `handle(.accessUnit
/// / .rtcp / .maximumBitrate, now:)` and `handleTimeout(now:)` in (media leaves
/// only at `handleTimeout`: the pacer decides when; the owner may call it after
/// every input, early calls send nothing early); `poll()` gives `.transmit`
/// (RTP, then probe padding, then an SR + SDES when due) and `.event` outputs
/// in the order they were decided until nil; then `nextDeadline()`. Each
/// datagram's bytes are referenced only by the output it leaves in, so SRTP
/// protects them in place.
///
/// Rate control (issue 14): every packet that leaves is reported to the
/// `SendSideBandwidthEstimator`, and feedback, REMB and receiver reports go to
/// it; its target sets the pacer's rate and is announced as `.targetRate` for
/// the encoder. The pacer is bounded in time and bytes (media past the bound
/// is dropped up to the next keyframe, and one is asked for); retransmissions
/// and loss-protection copies spend only a share of the target; probes leave
/// as RTX copies of recent packets.
public struct VideoSender: Sendable, SansIO {
    public enum Input: Sendable {
        /// An encoded picture of the configured codec (an H.264 access unit, or a VP8
        /// frame), packetized and queued in the pacer. After the pacer dropped media,
        /// frames other than keyframes are dropped (counted) until a keyframe comes; so
        /// is a frame that would pass `maxQueueBytes`. One that cannot be packetized
        /// gives `.accessUnitRejected`.
        case accessUnit([UInt8], captureTime: Instant)
        /// One (compound or reduced-size) RTCP datagram. Malformed input is counted in
        /// `statistics.malformedRTCP` and dropped.
        case rtcp([UInt8])
        /// The owner's ceiling for the estimate (e.g. 4 Mbit/s at 1080p, 2.5 at 720p; spec §7).
        case maximumBitrate(Int64)
    }

    /// What the sender decided, in order: a datagram to send, or an event.
    public enum Output: Equatable, Sendable {
        case transmit(Datagram)
        case event(Event)
    }

    public struct ExtensionIDs: Sendable, Equatable {
        public var absSendTime: UInt8?
        public var transportCC: UInt8?
        public var playoutDelay: UInt8?
        public init(absSendTime: UInt8? = nil, transportCC: UInt8? = nil, playoutDelay: UInt8? = nil) {
            self.absSendTime = absSendTime
            self.transportCC = transportCC
            self.playoutDelay = playoutDelay
        }
    }

    public struct Configuration: Sendable {
        /// The negotiated codec (the answer's choice, spec §7) and its payload type.
        public var codec: VideoCodec
        public var payloadType: UInt8
        /// RFC 4588 RTX payload type when negotiated; plain retransmission otherwise.
        public var rtxPayloadType: UInt8?
        public var cname: String
        public var mtu: Int
        public var srtpOverhead: Int
        public var extensionIDs: ExtensionIDs
        /// playout-delay values sent when its extension is negotiated (0/0: render at once).
        public var playoutDelay: (minimum: Duration, maximum: Duration)
        /// The pacer; its rate follows the estimate, and `burstBytes` caps the burst (issue 19).
        public var pacer: Pacer<PacedPacket>.Configuration
        public var history: PacketHistory.Limits
        public var reportInterval: Duration
        /// Unix time at monotonic zero, for SR NTP timestamps.
        public var wallclockOffset: Duration
        public var keyframeMinimumInterval: Duration
        /// Resend spacing before any RTT has been measured.
        public var initialRTT: Duration
        /// Redundant RTX copies while loss is seen on a sparse stream (needs RTX).
        public var lossProtection: LossProtection.Configuration
        /// The send-side estimator (start, floor, ceiling, pacing factor).
        public var congestion: SendSideBandwidthEstimator.Configuration
        /// No media packet waits in the pacer longer than this: past it, the rest of
        /// its frame and the frames after it up to a keyframe are dropped and a keyframe
        /// is asked for. 500 ms: at a 500 kbit/s target (pacing 1.25 Mbit/s) a keyframe
        /// 8 × a 30 fps P-frame (~17 kB) needs ~110 ms, so the bound is only reached when
        /// the queue holds several frames the link cannot carry; any longer and the
        /// picture is too old to be worth showing.
        public var maxQueueDelay: Duration
        /// Media bytes the pacer holds at most; a frame that would pass it is dropped.
        public var maxQueueBytes: Int
        /// Retransmissions and copies together may use this share of the target over
        /// `overheadWindow` (the media takes the rest; libwebrtc likewise subtracts its
        /// protection overhead from the encoder's target). Excess NACKs are ignored.
        public var retransmissionShare: Double
        public var overheadWindow: Duration
        /// Spare capacity each RTP datagram is built with, so that the transport appends
        /// its trailer in place (SRTP: `SRTPProtector.trailerCapacity`; issue 19).
        public var trailerCapacity: Int
        /// How much of the pacing rate may leave back to back (30 ms; libwebrtc's is 40;
        /// capped by `pacer.burstBytes`, issue 19).
        public var pacerBurstInterval: Duration

        public init(codec: VideoCodec = .h264, payloadType: UInt8, rtxPayloadType: UInt8? = nil, cname: String,
                    mtu: Int = RTPConstants.defaultMTU, srtpOverhead: Int = 16,
                    extensionIDs: ExtensionIDs = ExtensionIDs(),
                    playoutDelay: (minimum: Duration, maximum: Duration) = (.zero, .zero),
                    pacer: Pacer<PacedPacket>.Configuration = .init(burstBytes: Pacer<PacedPacket>.Configuration.maxBurstBytes),
                    history: PacketHistory.Limits = .init(),
                    reportInterval: Duration = .seconds(1), wallclockOffset: Duration,
                    keyframeMinimumInterval: Duration = .milliseconds(500), initialRTT: Duration = .milliseconds(100),
                    lossProtection: LossProtection.Configuration = .init(),
                    congestion: SendSideBandwidthEstimator.Configuration = .init(),
                    maxQueueDelay: Duration = .milliseconds(500), maxQueueBytes: Int = 1_000_000,
                    retransmissionShare: Double = 0.5, overheadWindow: Duration = .seconds(1),
                    trailerCapacity: Int = 0,
                    pacerBurstInterval: Duration = Pacer<PacedPacket>.Configuration.burstInterval) {
            self.codec = codec
            self.payloadType = payloadType
            self.rtxPayloadType = rtxPayloadType
            self.cname = cname
            self.mtu = mtu
            self.srtpOverhead = srtpOverhead
            self.extensionIDs = extensionIDs
            self.playoutDelay = playoutDelay
            self.pacer = pacer
            self.history = history
            self.reportInterval = reportInterval
            self.wallclockOffset = wallclockOffset
            self.keyframeMinimumInterval = keyframeMinimumInterval
            self.initialRTT = initialRTT
            self.lossProtection = lossProtection
            self.congestion = congestion
            self.maxQueueDelay = maxQueueDelay
            self.maxQueueBytes = max(0, maxQueueBytes)
            self.retransmissionShare = min(max(retransmissionShare, 0), 1)
            self.overheadWindow = max(overheadWindow, .milliseconds(100))
            self.trailerCapacity = max(0, trailerCapacity)
            self.pacerBurstInterval = pacerBurstInterval
        }
    }

    /// A packet waiting in the pacer.
    public struct PacedPacket: Sendable {
        var packet: RTPPacket
        var captureTime: Instant
        var isRetransmission: Bool
        /// A redundant copy from `LossProtection` (sent over RTX, not counted as a retransmission).
        var isCopy = false
        /// When it entered the pacer, for the time bound.
        var queuedAt: Instant = .zero
        /// The first packet of a keyframe (media only).
        var startsKeyframe = false
        /// The first packet of an access unit (media only).
        var startsFrame = false
    }

    public enum Datagram: Equatable, Sendable {
        case rtp([UInt8])
        case rtcp([UInt8])

        /// Runs `body` on the bytes where they lie. The datagram lets go of them
        /// meanwhile, so bytes referenced from nowhere else are `body`'s alone and
        /// change without a copy (SRTP protects them in place, issue 19).
        public mutating func withBytes<R>(_ body: (inout [UInt8]) throws -> R) rethrows -> R {
            switch self {
            case .rtp(var bytes):
                self = .rtp([])
                defer { self = .rtp(bytes) }
                return try body(&bytes)
            case .rtcp(var bytes):
                self = .rtcp([])
                defer { self = .rtcp(bytes) }
                return try body(&bytes)
            }
        }
    }

    public enum KeyframeReason: Equatable, Sendable {
        case pictureLoss, fullIntraRequest
        /// Media was dropped by the pacer's bounds: the next frames need a fresh start.
        case congestion
    }

    public enum Event: Equatable, Sendable {
        /// The encoder should produce an IDR now (already rate-limited to one per 500 ms).
        case keyframeRequested(KeyframeReason)
        /// A NACKed packet was queued for resending (RTX or plain).
        case retransmit(sequenceNumber: UInt16)
        case bandwidthEstimate(BandwidthEstimate)
        case receiverReport(ReceiverStatistics)
        /// The encoder should produce `bitsPerSecond` (the estimate less what
        /// retransmissions and copies use); the pacer now sends at `pacingBitsPerSecond`.
        /// Sent when either moves by 2 % or more, or the detector's verdict changes.
        case targetRate(bitsPerSecond: Int64, pacingBitsPerSecond: Int64, usage: BandwidthUsage)
        /// An access unit the packetizer refused (the reason); nothing of it was sent.
        case accessUnitRejected(CastError)
    }

    public struct Statistics: Equatable, Sendable {
        public var framesSent = 0
        public var keyframesSent = 0
        public var packetsSent = 0
        public var bytesSent = 0
        public var retransmissionsSent = 0
        /// Bytes of retransmissions and copies (what the retransmission budget bounds).
        public var retransmissionBytesSent = 0
        /// Redundant RTX copies sent by loss protection.
        public var copiesSent = 0
        public var nacksReceived = 0
        /// NACKed packets no longer in the history, or resent less than an RTT ago.
        public var nacksIgnored = 0
        public var pictureLossReceived = 0
        public var fullIntraRequestsReceived = 0
        public var keyframesRequested = 0
        public var malformedRTCP = 0
        public var senderReportsSent = 0
        public var roundTripTime: Duration?
        public var receiver: ReceiverStatistics?
        public var bandwidth: BandwidthEstimate?
        /// The estimator's view: target (before overhead), pacing rate, verdict, acked rate, loss.
        public var estimate: SendSideBandwidthEstimator.RateTarget?
        /// What the encoder is asked for (`.targetRate`).
        public var mediaTargetBitsPerSecond: Int64 = 0
        public var probesSent = 0
        public var probePacketsSent = 0
        /// Frames dropped, whole or in part, by the pacer's time or byte bound.
        public var framesDroppedByPacer = 0
        public var packetsDroppedByPacer = 0
        /// NACKs not answered because retransmissions had used their share of the target.
        public var nacksIgnoredForBudget = 0
        /// NACKs not answered because the packet was sent more than `maxQueueDelay` ago.
        public var nacksPastRepair = 0
        /// Losses confirmed by transport-cc (missing past the reordering window) and late packets.
        public var lossesConfirmed = 0
        public var latePacketsReported = 0
        /// Issue 19, per frame from its capture instant: to `send(accessUnit:)` (capture,
        /// conversion, encoding and the hand-over to this sender's thread), to its first
        /// packet leaving the pacer, to its last.
        public var captureToQueued = LatencyHistogram()
        public var captureToFirstSent = LatencyHistogram()
        public var captureToLastSent = LatencyHistogram()
    }

    public let configuration: Configuration
    public private(set) var packetizer: VideoPacketizer
    public private(set) var statistics = Statistics()
    private var rtx: RTXEncoder?
    private var history: PacketHistory
    /// Sender reports, and the buffers of sent datagrams given back by the owner
    /// (`recycle`) that later packets and reports are built in.
    private var reporter: SenderReporter
    private var pacer: Pacer<PacedPacket>
    private var keyframes: KeyframeRequestLimiter
    private var transportCC: TransportCCTracker
    private var protection: LossProtection
    private var estimator: SendSideBandwidthEstimator
    /// Retransmission and copy bytes over `overheadWindow`.
    private var overhead: RateWindow
    private var announced: (bitsPerSecond: Int64, pacing: Int64, usage: BandwidthUsage)?
    private var outputs = OutputQueue<Output>()
    /// Set when media was dropped: frames are not queued until the next keyframe.
    private var awaitingKeyframe = false
    private var congestionKeyframeRequestedAt: Instant?
    private var lastKeyframeQueuedAt: Instant?
    /// The last media packet sent belonged to a keyframe (whose rest is not dropped).
    private var sendingKeyframe = false
    /// Probe clusters waiting, and the one being sent.
    private var probeQueue: [ProbeCluster] = []
    private var probe: (cluster: ProbeCluster, bytes: Int, packets: Int, next: Instant)?
    /// The latest media sequence numbers sent, for probe padding.
    private var recentMedia: [UInt16] = []
    private var recentMediaNext = 0
    private let extensionLength: Int
    /// The packets of the picture being queued: one array reused for every picture.
    private var packetized: [RTPPacket] = []

    public var ssrc: UInt32 { packetizer.ssrc }
    public var rtxSSRC: UInt32? { rtx?.ssrc }

    /// A sender with random SSRCs (RFC 3550 §8.1), sequence numbers and timestamp start.
    public init(configuration: Configuration, random: inout some RandomNumberGenerator) throws {
        let ssrc = UInt32.random(in: 1...UInt32.max, using: &random)
        var rtxSSRC = UInt32.random(in: 1...UInt32.max, using: &random)
        if rtxSSRC == ssrc { rtxSSRC &+= 1 }
        try self.init(configuration: configuration, ssrc: ssrc, rtxSSRC: rtxSSRC, random: &random)
    }

    /// A sender with SSRCs chosen by the caller (the SDP offer announces them
    /// with `a=ssrc` and `a=ssrc-group:FID` before this sender exists); sequence
    /// numbers and the timestamp start are still random. `rtxSSRC` is used only
    /// when RTX is configured.
    public init(configuration: Configuration, ssrc: UInt32, rtxSSRC: UInt32,
                random: inout some RandomNumberGenerator) throws {
        guard configuration.rtxPayloadType == nil || rtxSSRC != ssrc else {
            throw CastError(.usage, "the RTX stream needs its own SSRC (RFC 4588 §5)")
        }
        self.configuration = configuration
        let ids = configuration.extensionIDs
        var probe: [RTPHeaderExtension] = []
        if let id = ids.absSendTime { probe.append(RTPHeaderExtension(id: id, data: [0, 0, 0])) }
        if let id = ids.transportCC { probe.append(RTPHeaderExtension(id: id, data: [0, 0])) }
        if let id = ids.playoutDelay { probe.append(RTPHeaderExtension(id: id, data: [0, 0, 0])) }
        let extLength = probe.isEmpty ? 0 : RTPExtensionBlock.best(for: probe).encodedLength
        let pc = PacketizerConfiguration(payloadType: configuration.payloadType, mtu: configuration.mtu,
                                              headerExtensionLength: extLength,
                                              srtpOverhead: configuration.srtpOverhead,
                                              rtxOverhead: configuration.rtxPayloadType == nil ? 0 : 2)
        extensionLength = extLength
        packetizer = try VideoPacketizer(codec: configuration.codec, configuration: pc, ssrc: ssrc, random: &random)
        if let pt = configuration.rtxPayloadType {
            rtx = RTXEncoder(ssrc: rtxSSRC, payloadType: pt,
                             initialSequenceNumber: UInt16.random(in: 0...UInt16.max, using: &random))
        }
        history = PacketHistory(limits: configuration.history)
        reporter = SenderReporter(
            reports: RTCPSenderState(ssrc: packetizer.ssrc, cname: configuration.cname,
                                     interval: configuration.reportInterval,
                                     wallclockOffset: configuration.wallclockOffset),
            buffers: BufferPool(minimumCapacity: configuration.mtu + configuration.trailerCapacity))
        pacer = Pacer(configuration: configuration.pacer)
        keyframes = KeyframeRequestLimiter(minimumInterval: configuration.keyframeMinimumInterval)
        transportCC = TransportCCTracker(initialSequenceNumber: 1)
        // Copies must not repeat a sequence number of the media stream (SRTP replay): RTX only.
        protection = LossProtection(configuration: configuration.rtxPayloadType == nil ? .off : configuration.lossProtection)
        // Probes need transport-cc to be measured and RTX to carry the padding.
        var cc = configuration.congestion
        cc.probing = cc.probing && ids.transportCC != nil && configuration.rtxPayloadType != nil
        estimator = SendSideBandwidthEstimator(configuration: cc)
        overhead = RateWindow(length: configuration.overheadWindow)
        applyTarget(estimator.target, now: nil)
        pacer = Pacer(configuration: pacer.configuration)   // its first burst sized for the start rate
        outputs = OutputQueue()   // the start target is `targetBitsPerSecond`, not news
    }

    /// Whether packets sent now would get redundant copies.
    public func isProtecting(now: Instant) -> Bool { protection.isActive(now: now) }

    // MARK: The contract

    public mutating func handle(_ input: Input, now: Instant) {
        switch input {
        case .accessUnit(let au, let captureTime):
            do { try send(accessUnit: au, captureTime: captureTime, now: now) }
            catch { emit(.accessUnitRejected(error as? CastError ?? CastError(.malformed, "\(error)"))) }
        case .rtcp(let bytes): handleRTCP(bytes, now: now)
        case .maximumBitrate(let b): setMaximumBitrate(b, now: now)
        }
    }

    public mutating func poll() -> Output? { outputs.pop() }

    private mutating func emit(_ e: Event) { outputs.push(.event(e)) }

    // MARK: Media in

    private mutating func send(accessUnit: [UInt8], captureTime: Instant, now: Instant) throws {
        let isKeyframe = packetizer.isKeyframe(accessUnit)
        if awaitingKeyframe, !isKeyframe {
            statistics.framesDroppedByPacer += 1
            startAwaitingKeyframe(now: now)   // repeats the request if it is a second old
            return
        }
        if !isKeyframe, pacer.mediaBytes + accessUnit.count > configuration.maxQueueBytes {
            statistics.framesDroppedByPacer += 1
            startAwaitingKeyframe(now: now)
            return
        }
        packetized.removeAll(keepingCapacity: true)
        defer { packetized.removeAll(keepingCapacity: true) }   // the packets hold the picture: let it go
        let keyframe = try packetizer.packetize(accessUnit, captureTime: captureTime, into: &packetized)
        guard !packetized.isEmpty else { return }
        statistics.framesSent += 1
        statistics.captureToQueued.record(now - captureTime)
        if keyframe {
            statistics.keyframesSent += 1
            keyframes.keyframeSent(now: now)
            lastKeyframeQueuedAt = now
            awaitingKeyframe = false
            congestionKeyframeRequestedAt = nil
            // What waits before a keyframe is not needed by anything after it.
            if pacer.mediaBytes + accessUnit.count > configuration.maxQueueBytes { dropQueuedMedia(upToKeyframe: false) }
        }
        for (i, p) in packetized.enumerated() {
            pacer.enqueue(PacedPacket(packet: p, captureTime: captureTime, isRetransmission: false, queuedAt: now,
                                      startsKeyframe: i == 0 && keyframe, startsFrame: i == 0),
                          size: p.encodedLength)
        }
    }

    /// Registers a packet of another stream of this transport (the audio sender's, in
    /// the same BUNDLE) of `size` bytes on the wire, SRTP tag included, sent at `now`:
    /// it takes the next number from the one transport-wide sequence, and the estimator
    /// counts it as sent, so that feedback covering it is matched (draft-holmer-rmcat-
    /// transport-wide-cc-extensions-01 §2: one sequence number space for all packets of
    /// the transport). nil when transport-cc was not negotiated for video.
    public mutating func registerCompanionPacket(size: Int, now: Instant) -> UInt16? {
        guard configuration.extensionIDs.transportCC != nil else { return nil }
        let seq = transportCC.allocate(size: size)
        estimator.handle(.packetSent(transportSequenceNumber: seq, size: size, probeCluster: nil), now: now)
        return seq
    }

    private mutating func setMaximumBitrate(_ bitsPerSecond: Int64, now: Instant) {
        estimator.handle(.maximumBitrate(bitsPerSecond), now: now)
        drainEstimator(now: now)
    }

    /// Media bytes waiting in the pacer (O(1)).
    public var queuedBytes: Int { pacer.mediaBytes }
    /// How long the waiting media needs at the current pacing rate (O(1)): the
    /// encoder skips a frame that would still wait behind this for more than a
    /// frame interval once encoded (CastMedia `BacklogGate`).
    public var queuedDuration: Duration {
        .nanoseconds(Int64(pacer.mediaBytes) * 8_000_000_000 / max(pacer.configuration.bitsPerSecond, 1))
    }
    /// What the encoder should produce now (the last `.targetRate`).
    public var targetBitsPerSecond: Int64 { statistics.mediaTargetBitsPerSecond }

    // MARK: Datagrams out

    /// Everything due at `now`: paced RTP packets, probe padding, then an SR + SDES compound when due.
    public mutating func handleTimeout(now: Instant) {
        if let d = estimator.nextDeadline(), d <= now {
            estimator.handleTimeout(now: now)
            drainEstimator(now: now)
            applyTarget(estimator.target, now: now)   // the retransmission overhead moves with time too
        }
        for seq in protection.due(now: now) {
            guard let p = history.packet(seq) else { continue }   // aged out meanwhile
            // Copies come out of the same share of the target as retransmissions.
            guard spendOverhead(p.encodedLength + 2, now: now) else { continue }
            pacer.enqueue(PacedPacket(packet: p, captureTime: now, isRetransmission: true, isCopy: true, queuedAt: now),
                          size: p.encodedLength + 2)
        }
        enforceQueueBound(now: now)
        while let item = pacer.next(now: now) {
            // Media that leaves while a probe runs is part of it, as libwebrtc's prober counts every
            // packet it paces: the receiver sees both, and a probe that counted only its padding read
            // a link shared with 30 fps of media as the padding's share of it (1.8 of 3 Mbit/s, so
            // an application-limited cast's periodic probes never raised the estimate).
            let cluster = item.isRetransmission ? nil : probe?.cluster.id
            if let d = transmit(item, now: now, probeCluster: cluster) {
                outputs.push(.transmit(d))
                recordSendLatency(item, now: now)
                if cluster != nil, case .rtp(let b) = d {
                    probe?.bytes += b.count
                    probe?.packets += 1
                }
            }
        }
        sendProbe(now: now)
        if let report = reporter.reportIfDue(now: now) {
            statistics.senderReportsSent += 1
            outputs.push(.transmit(report))
        }
    }

    /// A datagram's bytes back once they are sent (or dropped): later packets are built in
    /// them. Bytes still referenced elsewhere are harmless here (the packet built in them
    /// then gets storage of its own, copy on write), so giving back is never a use after
    /// return. Too small a buffer, or one past the pool's bound, is let go.
    public mutating func recycle(_ bytes: consuming [UInt8]) { reporter.recycle(consume bytes) }

    /// Whether `recycle` would keep a buffer of `capacity` bytes now.
    public func wantsBuffer(capacity: Int) -> Bool { reporter.wantsBuffer(capacity: capacity) }

    /// Datagram buffers reused from `recycle`, and ones made new (tests, the bench).
    public var bufferCounts: (reused: Int, made: Int) { reporter.bufferCounts }

    /// When `handleTimeout` should be called next (nil: only when new input arrives).
    public func nextDeadline() -> Instant? {
        // Pairwise, not through an array: the driver asks on every turn.
        var d = Instant.earliest(pacer.nextDeadline, reporter.reports.nextReportAt)
        d = Instant.earliest(d, protection.nextDeadline)
        d = Instant.earliest(d, estimator.nextDeadline())
        d = Instant.earliest(d, probe?.next)
        return Instant.earliest(d, firstQueuedExpiry)
    }

    /// An RTCP BYE for our SSRCs (RFC 3550 §6.6), for a clean stop.
    public func goodbye(reason: String = "") -> Datagram? {
        var sources = [ssrc]
        if let r = rtx?.ssrc { sources.append(r) }
        guard let bytes = try? RTCPCompound.serialize([
            .receiverReport(ReceiverReport(ssrc: ssrc)), .goodbye(Goodbye(sources: sources, reason: reason)),
        ]) else { return nil }
        return .rtcp(bytes)
    }

    /// A frame's first and last media packet on their way out (issue 19's breakdown).
    private mutating func recordSendLatency(_ item: PacedPacket, now: Instant) {
        guard !item.isRetransmission else { return }
        if item.startsFrame { statistics.captureToFirstSent.record(now - item.captureTime) }
        if item.packet.header.marker { statistics.captureToLastSent.record(now - item.captureTime) }
    }

    private mutating func transmit(_ item: PacedPacket, now: Instant, probeCluster: Int? = nil) -> Datagram? {
        var packet = item.packet
        if item.isRetransmission, var r = rtx {
            packet = r.wrap(packet)
            rtx = r
        }
        // Extensions are stamped at send time: abs-send-time and the transport-wide
        // sequence describe this transmission, not the packetization.
        // Stamped inline and written straight into the datagram with room for SRTP's
        // trailer: the packet's one allocation (issue 19).
        let ids = configuration.extensionIDs
        var stamps = RTPInlineExtensions()
        if let id = ids.absSendTime { stamps.append(id: id, value: RTPExtensionValue.absSendTimeValue(now), length: 3) }
        var transportSeq: UInt16?
        if let id = ids.transportCC {
            // Its size on the wire: header, extensions, payload and the SRTP tag.
            let seq = transportCC.allocate(size: packet.encodedLength + extensionLength + configuration.srtpOverhead)
            stamps.append(id: id, value: UInt32(seq), length: 2)
            transportSeq = seq
        }
        if let id = ids.playoutDelay {
            let d = configuration.playoutDelay
            stamps.append(id: id, value: RTPExtensionValue.playoutDelayValue(minimum: d.minimum, maximum: d.maximum), length: 3)
        }
        guard let bytes = try? packet.serialize(extensions: stamps, trailerCapacity: configuration.trailerCapacity,
                                                into: reporter.takeBuffer())
        else { return nil }
        estimator.handle(.packetSent(transportSequenceNumber: transportSeq, size: bytes.count + configuration.srtpOverhead,
                                     probeCluster: probeCluster), now: now)

        if !item.isRetransmission {
            history.insert(item.packet, sentAt: now)
            protection.sent(item.packet.header.sequenceNumber, bytes: bytes.count, kind: .original, now: now)
            rememberMedia(item.packet.header.sequenceNumber)
            if item.startsFrame { sendingKeyframe = item.startsKeyframe }
        } else if probeCluster != nil {
            statistics.probePacketsSent += 1
        } else if item.isCopy {
            statistics.copiesSent += 1
            statistics.retransmissionBytesSent += bytes.count
        } else {
            statistics.retransmissionsSent += 1
            statistics.retransmissionBytesSent += bytes.count
            protection.sent(item.packet.header.sequenceNumber, bytes: bytes.count, kind: .retransmission, now: now)
        }
        if packet.header.ssrc == ssrc {
            reporter.reports.packetSent(payloadLength: packet.payloadLength, rtpTimestamp: packet.header.timestamp,
                               captureTime: item.captureTime, now: now, isRetransmission: item.isRetransmission)
        }
        statistics.packetsSent += 1
        statistics.bytesSent += bytes.count
        return .rtp(bytes)
    }

    // MARK: RTCP in

    private mutating func handleRTCP(_ bytes: [UInt8], now: Instant) {
        guard let packets = try? RTCPCompound.parse(bytes) else {
            statistics.malformedRTCP += 1
            return
        }
        for p in packets {
            switch p {
            case .receiverReport(let rr): handle(rr.reports, now: now)
            case .senderReport(let sr): handle(sr.reports, now: now)
            case .nack(let nack) where nack.mediaSSRC == ssrc:
                statistics.nacksReceived += 1
                for seq in nack.lostSequenceNumbers { handleNACK(seq, now: now) }
            case .pictureLoss(let pli) where pli.mediaSSRC == ssrc:
                statistics.pictureLossReceived += 1
                if keyframes.pictureLoss(now: now) {
                    statistics.keyframesRequested += 1
                    emit(.keyframeRequested(.pictureLoss))
                }
            case .fullIntraRequest(let fir):
                for e in fir.entries where e.ssrc == ssrc {
                    statistics.fullIntraRequestsReceived += 1
                    if keyframes.fullIntraRequest(from: fir.senderSSRC, sequenceNumber: e.sequenceNumber, now: now) {
                        statistics.keyframesRequested += 1
                        emit(.keyframeRequested(.fullIntraRequest))
                    }
                }
            case .remb(let remb):
                let e = BandwidthEstimate(source: .remb, bitsPerSecond: remb.bitrate)
                statistics.bandwidth = e
                estimator.handle(.remb(bitsPerSecond: remb.bitrate), now: now)
                emit(.bandwidthEstimate(e))
            case .transportCC(let fb):
                let confirmed = estimator.lossesConfirmed
                estimator.handle(.transportFeedback(fb), now: now)
                // Evidence of loss: packets still missing once a packet sent a reordering window later arrived.
                if estimator.lossesConfirmed > confirmed { protection.lossSeen(now: now) }
                statistics.lossesConfirmed = estimator.lossesConfirmed
                statistics.latePacketsReported = estimator.lateReports
                if let e = transportCC.estimate(fb) {
                    statistics.bandwidth = e
                    emit(.bandwidthEstimate(e))
                }
            default:
                break
            }
        }
        drainEstimator(now: now)
    }

    private mutating func handle(_ blocks: [ReportBlock], now: Instant) {
        for b in blocks where b.ssrc == ssrc {
            if b.fractionLost > 0 { protection.lossSeen(now: now) }
            let s = reporter.reports.received(b, now: now)
            statistics.receiver = s
            if let rtt = s.roundTripTime { statistics.roundTripTime = rtt }
            estimator.handle(.receiverReport(fractionLost: s.fractionLost, roundTripTime: s.roundTripTime), now: now)
            emit(.receiverReport(s))
        }
    }

    private mutating func handleNACK(_ seq: UInt16, now: Instant) {
        if isPastRepair(seq, now: now) { return }
        // The budget first: a NACK storm on a congested link must not multiply the load.
        if let p = history.packet(seq), !canSpendOverhead(p.encodedLength + (rtx == nil ? 0 : 2), now: now) {
            statistics.nacksIgnoredForBudget += 1
            statistics.nacksIgnored += 1
            return
        }
        switch history.resend(seq, now: now, rtt: statistics.roundTripTime ?? configuration.initialRTT) {
        case .resend(let p):
            let size = p.encodedLength + (rtx == nil ? 0 : 2)
            _ = spendOverhead(size, now: now)
            pacer.enqueue(PacedPacket(packet: p, captureTime: now, isRetransmission: true, queuedAt: now),
                          size: size, urgent: true)
            emit(.retransmit(sequenceNumber: seq))
            // A NACK is not evidence of loss, however old the packet: webrtcbin NACKs packets
            // that are merely late at its jitter buffer (2–30 ms, and hundreds of ms while its
            // process is short of CPU, with the packets waiting unread in its socket). The
            // evidence is the receiver's own count (a report block's fraction lost) or
            // transport-cc feedback.
        case .unknown, .rateLimited:
            statistics.nacksIgnored += 1   // not evidence of loss either
        }
    }

}

// MARK: Rate control

extension VideoSender {
    /// Reads the estimator's outputs: targets set the pacer and are announced; probes are queued.
    private mutating func drainEstimator(now: Instant) {
        while let out = estimator.poll() {
            switch out {
            case .target(let t): applyTarget(t, now: now)
            case .probe(let c): if probeQueue.count < 4 { probeQueue.append(c) }
            }
        }
    }

    private mutating func applyTarget(_ t: SendSideBandwidthEstimator.RateTarget, now: Instant?) {
        statistics.estimate = t
        // A burst like libwebrtc's (issue 19): 30 ms of the pacing rate, never more than configured.
        pacer.configuration = .bursting(bitsPerSecond: t.pacingBitsPerSecond, interval: configuration.pacerBurstInterval,
                                        maxBurstBytes: configuration.pacer.burstBytes)
        protection.bandwidthEstimated(bitsPerSecond: UInt64(max(t.bitsPerSecond, 0)))
        protection.congestionChanged(overusing: t.usage == .overusing)
        // The encoder gets the target less what retransmissions and copies use now
        // (at most their share), never below the estimator's floor.
        var used: Int64 = 0
        if let now { used = overhead.bitsPerSecond(now: now) }
        let media = max(t.bitsPerSecond - min(used, Int64(Double(t.bitsPerSecond) * configuration.retransmissionShare)),
                        min(t.bitsPerSecond, estimator.configuration.minimumBitrate))
        statistics.mediaTargetBitsPerSecond = media
        if let a = announced, a.usage == t.usage,
           abs(a.bitsPerSecond - media) * 50 < a.bitsPerSecond, abs(a.pacing - t.pacingBitsPerSecond) * 50 < a.pacing {
            return
        }
        announced = (media, t.pacingBitsPerSecond, t.usage)
        emit(.targetRate(bitsPerSecond: media, pacingBitsPerSecond: t.pacingBitsPerSecond, usage: t.usage))
    }

    /// Whether `bytes` more of retransmissions or copies fit the share of the estimate over the window.
    private mutating func canSpendOverhead(_ bytes: Int, now: Instant) -> Bool {
        let budget = Double(estimator.target.bitsPerSecond) * configuration.retransmissionShare
            * configuration.overheadWindow.seconds / 8
        return Double(overhead.bytes(now: now) + bytes) <= budget
    }

    private mutating func spendOverhead(_ bytes: Int, now: Instant) -> Bool {
        guard canSpendOverhead(bytes, now: now) else { return false }
        overhead.add(bytes, now: now)
        return true
    }

    /// After a congestion drain (within `pastRepairWindow` of its end), a media packet first
    /// sent more than `maxQueueDelay` ago is not resent: its frame is older than the pacer
    /// lets any media get, and the resend would only queue ahead of newer frames on a link
    /// just found too slow. On the simulated 1.2 Mbit/s link such resends, released by the
    /// budget a second after the fall, filled the drained queue again (a frame then took
    /// 1014 ms). The receiver cannot decode past the gap, so a keyframe is asked for (and
    /// frames are dropped until it comes), as when the pacer drops media. Losses on a link
    /// that is not congested are repaired however late (LossProtectionTests).
    private mutating func isPastRepair(_ seq: UInt16, now: Instant) -> Bool {
        guard let drained = estimator.lastDrainAt, now - drained < Self.pastRepairWindow,
              let sent = history.sentAt(seq), now - sent > configuration.maxQueueDelay else { return false }
        statistics.nacksIgnored += 1
        statistics.nacksPastRepair += 1
        // A keyframe queued after the packet already starts the picture afresh.
        if !awaitingKeyframe, lastKeyframeQueuedAt.map({ $0 <= sent }) ?? true { startAwaitingKeyframe(now: now) }
        return true
    }

    static let pastRepairWindow = Duration.seconds(2)

    /// When the queued media passes the time bound (`enforceQueueBound`): the oldest
    /// packet's, or while a frame is in flight, the next frame's first packet's.
    private var firstQueuedExpiry: Instant? {
        guard let f = expiringFrameStart else { return nil }
        return f.queuedAt + configuration.maxQueueDelay + .nanoseconds(1)
    }

    /// The first packet whose wait the time bound measures: the oldest queued media packet
    /// when it begins a frame; while a frame is in flight (its first packet left), the first
    /// packet of the frame queued behind it. A keyframe's never.
    private var expiringFrameStart: PacedPacket? {
        guard let f = pacer.firstQueued else { return nil }
        if f.startsFrame { return f.startsKeyframe ? nil : f }
        if sendingKeyframe { return nil }
        guard let next = pacer.queued(afterFirst: { $0.startsFrame }), !next.startsKeyframe else { return nil }
        return next
    }

    /// A frame that waited past `maxQueueDelay` without beginning is dropped with every
    /// frame after it up to a keyframe (they depend on it), and with it the rest of a frame
    /// in flight ahead of it. A keyframe is kept, and so is the rest of a frame in flight
    /// while nothing queued behind it has waited past the bound, however long the frame
    /// takes: cutting it would leave the receiver nothing to decode until a keyframe, larger
    /// than what was left, and the frame behind that keyframe would then wait past the bound
    /// in turn. With VP8's 80 KB frames of the busy 1080p screen on a 1 Mbit/s tbf link
    /// (640 ms a frame), every frame was cut so and half the frames sent were keyframes
    /// (docs/receivers.md, "VP8 through a narrow link"). When the link falls under queued
    /// frames, those behind expire and the frame in flight goes with them, as before: its
    /// rest would only slow the drain, the receiver needing a keyframe anyway.
    private mutating func enforceQueueBound(now: Instant) {
        // A copy that waited that long is no use to anyone: it just goes.
        _ = pacer.dropQueued { $0.isCopy && now - $0.queuedAt > configuration.maxQueueDelay }
        // The head is the oldest: while it is within the bound nothing behind it can be past it,
        // and the scan behind a frame in flight (`expiringFrameStart`) is not needed.
        guard let head = pacer.firstQueued, now - head.queuedAt > configuration.maxQueueDelay,
              let f = expiringFrameStart, now - f.queuedAt > configuration.maxQueueDelay else { return }
        dropQueuedMedia(upToKeyframe: true)
        if pacer.firstQueued?.startsKeyframe != true { startAwaitingKeyframe(now: now) }
    }

    /// Drops queued media from the front: up to the next keyframe, or all of it.
    private mutating func dropQueuedMedia(upToKeyframe: Bool) {
        var first = true
        let dropped = pacer.dropQueued { item in
            defer { first = false }
            return !(item.startsKeyframe && (!first || upToKeyframe))
        }
        guard !dropped.isEmpty else { return }
        statistics.packetsDroppedByPacer += dropped.count
        // Frames touched: those starting in the dropped run, plus the one cut at its head.
        let starts = dropped.filter(\.startsFrame).count
        statistics.framesDroppedByPacer += starts + (dropped.first?.startsFrame == true ? 0 : 1)
        sendingKeyframe = false
    }

    /// Starts dropping frames until a keyframe, and asks for one: once, and again
    /// every second while none comes (a lost request must not stall the picture).
    private mutating func startAwaitingKeyframe(now: Instant) {
        awaitingKeyframe = true
        if let last = congestionKeyframeRequestedAt, now - last < .seconds(1) { return }
        congestionKeyframeRequestedAt = now
        statistics.keyframesRequested += 1
        emit(.keyframeRequested(.congestion))
    }

    private mutating func rememberMedia(_ seq: UInt16) {
        if recentMedia.count < 16 { recentMedia.append(seq) } else { recentMedia[recentMediaNext] = seq }
        recentMediaNext = (recentMediaNext + 1) % 16
    }

    /// Sends the current probe cluster's padding due at `now`: RTX copies of recent
    /// media packets at the cluster's rate, until its packets and bytes are out.
    private mutating func sendProbe(now: Instant) {
        if probe == nil, !probeQueue.isEmpty { startNextProbe(at: now) }
        guard var p = probe, rtx != nil else { probe = nil; return }
        var k = 0
        while p.next <= now, p.packets < p.cluster.minPackets || p.bytes < p.cluster.minBytes {
            guard !recentMedia.isEmpty, let original = history.packet(recentMedia[(recentMediaNext + recentMedia.count - 1 - k % recentMedia.count) % recentMedia.count])
            else { probe = nil; return }
            k += 1
            let item = PacedPacket(packet: original, captureTime: now, isRetransmission: true, queuedAt: now)
            guard let d = transmit(item, now: now, probeCluster: p.cluster.id), case .rtp(let b) = d else { break }
            outputs.push(.transmit(d))
            p.bytes += b.count
            p.packets += 1
            p.next = p.next + .nanoseconds(Int64(b.count) * 8_000_000_000 / max(p.cluster.bitsPerSecond, 1))
        }
        guard p.packets >= p.cluster.minPackets && p.bytes >= p.cluster.minBytes else { probe = p; return }
        probe = nil
        // A cluster that follows this one goes at once, paced from where this one ended: a
        // gap until the next pacing turn (up to 100 ms while the screen is still) would let a
        // token bucket refill between the two (`ProbeCluster.followsPrevious`).
        if probeQueue.first?.followsPrevious == true {
            startNextProbe(at: p.next)
            sendProbe(now: now)
        }
    }

    /// Takes the next queued cluster as the one being sent, its first packet due at `at`.
    private mutating func startNextProbe(at: Instant) {
        probe = (probeQueue.removeFirst(), 0, 0, at)
        statistics.probesSent += 1
    }
}
