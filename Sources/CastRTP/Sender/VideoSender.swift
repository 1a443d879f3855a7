import CastCore

/// The video send path in one visible place (pion's interceptor chain, without
/// goroutines): access units in → packetizer → pacer → header extensions →
/// history → RTP datagrams; RTCP in → retransmissions, keyframe requests,
/// bandwidth estimates and statistics; `poll(now:)` → datagrams (RTP and the
/// periodic SR + SDES) and `nextDeadline`. Transport-agnostic: bytes in,
/// bytes out; SRTP and ICE wrap it.
public struct VideoSender: Sendable {
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

        public init(codec: VideoCodec = .h264, payloadType: UInt8, rtxPayloadType: UInt8? = nil, cname: String,
                    mtu: Int = RTPConstants.defaultMTU, srtpOverhead: Int = 16,
                    extensionIDs: ExtensionIDs = ExtensionIDs(),
                    playoutDelay: (minimum: Duration, maximum: Duration) = (.zero, .zero),
                    pacer: Pacer<PacedPacket>.Configuration = .init(), history: PacketHistory.Limits = .init(),
                    reportInterval: Duration = .seconds(1), wallclockOffset: Duration,
                    keyframeMinimumInterval: Duration = .milliseconds(500), initialRTT: Duration = .milliseconds(100),
                    lossProtection: LossProtection.Configuration = .init()) {
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
        }
    }

    /// A packet waiting in the pacer.
    public struct PacedPacket: Sendable {
        var packet: RTPPacket
        var captureTime: Instant
        var isRetransmission: Bool
        /// A redundant copy from `LossProtection` (sent over RTX, not counted as a retransmission).
        var isCopy = false
    }

    public enum Datagram: Equatable, Sendable {
        case rtp([UInt8])
        case rtcp([UInt8])
    }

    public enum KeyframeReason: Equatable, Sendable { case pictureLoss, fullIntraRequest }

    public enum Event: Equatable, Sendable {
        /// The encoder should produce an IDR now (already rate-limited to one per 500 ms).
        case keyframeRequested(KeyframeReason)
        /// A NACKed packet was queued for resending (RTX or plain).
        case retransmit(sequenceNumber: UInt16)
        case bandwidthEstimate(BandwidthEstimate)
        case receiverReport(ReceiverStatistics)
    }

    public struct Statistics: Equatable, Sendable {
        public var framesSent = 0
        public var keyframesSent = 0
        public var packetsSent = 0
        public var bytesSent = 0
        public var retransmissionsSent = 0
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
    }

    public let configuration: Configuration
    public private(set) var packetizer: VideoPacketizer
    public private(set) var statistics = Statistics()
    private var rtx: RTXEncoder?
    private var history: PacketHistory
    private var pacer: Pacer<PacedPacket>
    private var reports: RTCPSenderState
    private var keyframes: KeyframeRequestLimiter
    private var transportCC: TransportCCTracker
    private var protection: LossProtection
    private let extensionLength: Int

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
        pacer = Pacer(configuration: configuration.pacer)
        reports = RTCPSenderState(ssrc: packetizer.ssrc, cname: configuration.cname,
                                  interval: configuration.reportInterval,
                                  wallclockOffset: configuration.wallclockOffset)
        keyframes = KeyframeRequestLimiter(minimumInterval: configuration.keyframeMinimumInterval)
        transportCC = TransportCCTracker(initialSequenceNumber: 1)
        // Copies must not repeat a sequence number of the media stream (SRTP replay): RTX only.
        protection = LossProtection(configuration: configuration.rtxPayloadType == nil ? .off : configuration.lossProtection)
    }

    /// Whether packets sent now would get redundant copies.
    public func isProtecting(now: Instant) -> Bool { protection.isActive(now: now) }

    // MARK: Media in

    /// Packetizes an encoded picture of the configured codec (an H.264 access
    /// unit, or a VP8 frame) and queues it in the pacer; call `poll(now:)` next.
    public mutating func send(accessUnit: [UInt8], captureTime: Instant, now: Instant) throws {
        let out = try packetizer.packetize(accessUnit, captureTime: captureTime)
        guard !out.packets.isEmpty else { return }
        statistics.framesSent += 1
        if out.isKeyframe {
            statistics.keyframesSent += 1
            keyframes.keyframeSent(now: now)
        }
        for p in out.packets {
            pacer.enqueue(PacedPacket(packet: p, captureTime: captureTime, isRetransmission: false),
                          size: p.encodedLength)
        }
    }

    /// Changes the pacing rate (rate control, later, sets it from the estimate).
    public mutating func setPacingRate(bitsPerSecond: Int64) {
        pacer.configuration = .init(bitsPerSecond: bitsPerSecond, burstBytes: pacer.configuration.burstBytes)
    }

    // MARK: Datagrams out

    /// Everything due at `now`: paced RTP packets, then an SR + SDES compound when due.
    public mutating func poll(now: Instant) -> [Datagram] {
        var out: [Datagram] = []
        for seq in protection.due(now: now) {
            guard let p = history.packet(seq) else { continue }   // aged out meanwhile
            pacer.enqueue(PacedPacket(packet: p, captureTime: now, isRetransmission: true, isCopy: true),
                          size: p.encodedLength + 2)
        }
        for item in pacer.poll(now: now) {
            if let d = transmit(item, now: now) { out.append(d) }
        }
        if let compound = reports.poll(now: now), let bytes = try? RTCPCompound.serialize(compound) {
            statistics.senderReportsSent += 1
            out.append(.rtcp(bytes))
        }
        return out
    }

    /// When `poll` should be called next (nil: only when new input arrives).
    public var nextDeadline: Instant? {
        [pacer.nextDeadline, reports.nextReportAt, protection.nextDeadline].compactMap { $0 }.min()
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

    private mutating func transmit(_ item: PacedPacket, now: Instant) -> Datagram? {
        var packet = item.packet
        if item.isRetransmission, var r = rtx {
            packet = r.wrap(packet)
            rtx = r
        }
        // Extensions are stamped at send time: abs-send-time and the transport-wide
        // sequence describe this transmission, not the packetization.
        let ids = configuration.extensionIDs
        var elements: [RTPHeaderExtension] = []
        if let id = ids.absSendTime { elements.append(RTPHeaderExtension(id: id, data: RTPExtensionValue.absSendTime(now))) }
        if let id = ids.transportCC {
            // Its size on the wire: header, extensions, payload and the SRTP tag.
            let seq = transportCC.allocate(size: packet.encodedLength + extensionLength + configuration.srtpOverhead)
            elements.append(RTPHeaderExtension(id: id, data: RTPExtensionValue.transportSequence(seq)))
        }
        if let id = ids.playoutDelay {
            let d = configuration.playoutDelay
            elements.append(RTPHeaderExtension(id: id, data: RTPExtensionValue.playoutDelay(minimum: d.minimum, maximum: d.maximum)))
        }
        packet.header.extensions = elements.isEmpty ? nil : RTPExtensionBlock.best(for: elements)
        guard let bytes = try? packet.serialize() else { return nil }

        if !item.isRetransmission {
            history.insert(item.packet, sentAt: now)
            protection.sent(item.packet.header.sequenceNumber, bytes: bytes.count, kind: .original, now: now)
        } else if item.isCopy {
            statistics.copiesSent += 1
        } else {
            statistics.retransmissionsSent += 1
            protection.sent(item.packet.header.sequenceNumber, bytes: bytes.count, kind: .retransmission, now: now)
        }
        if packet.header.ssrc == ssrc {
            reports.packetSent(payloadLength: packet.payload.count, rtpTimestamp: packet.header.timestamp,
                               captureTime: item.captureTime, now: now, isRetransmission: item.isRetransmission)
        }
        statistics.packetsSent += 1
        statistics.bytesSent += bytes.count
        return .rtp(bytes)
    }

    // MARK: RTCP in

    /// Reads one (compound or reduced-size) RTCP datagram. Malformed input is
    /// counted in `statistics.malformedRTCP` and dropped.
    public mutating func handleRTCP(_ bytes: [UInt8], now: Instant) -> [Event] {
        guard let packets = try? RTCPCompound.parse(bytes) else {
            statistics.malformedRTCP += 1
            return []
        }
        var events: [Event] = []
        for p in packets {
            switch p {
            case .receiverReport(let rr): handle(rr.reports, now: now, into: &events)
            case .senderReport(let sr): handle(sr.reports, now: now, into: &events)
            case .nack(let nack) where nack.mediaSSRC == ssrc:
                statistics.nacksReceived += 1
                protection.lossSeen(now: now)
                for seq in nack.lostSequenceNumbers { handleNACK(seq, now: now, into: &events) }
            case .pictureLoss(let pli) where pli.mediaSSRC == ssrc:
                statistics.pictureLossReceived += 1
                if keyframes.pictureLoss(now: now) {
                    statistics.keyframesRequested += 1
                    events.append(.keyframeRequested(.pictureLoss))
                }
            case .fullIntraRequest(let fir):
                for e in fir.entries where e.ssrc == ssrc {
                    statistics.fullIntraRequestsReceived += 1
                    if keyframes.fullIntraRequest(from: fir.senderSSRC, sequenceNumber: e.sequenceNumber, now: now) {
                        statistics.keyframesRequested += 1
                        events.append(.keyframeRequested(.fullIntraRequest))
                    }
                }
            case .remb(let remb):
                let e = BandwidthEstimate(source: .remb, bitsPerSecond: remb.bitrate)
                statistics.bandwidth = e
                protection.bandwidthEstimated(bitsPerSecond: e.bitsPerSecond)
                events.append(.bandwidthEstimate(e))
            case .transportCC(let fb):
                if let e = transportCC.estimate(fb) {
                    statistics.bandwidth = e
                    // An arrival rate, not a capacity: it only tells of loss here.
                    if let f = e.lossFraction, f > 0 { protection.lossSeen(now: now) }
                    events.append(.bandwidthEstimate(e))
                }
            default:
                break
            }
        }
        return events
    }

    private mutating func handle(_ blocks: [ReportBlock], now: Instant, into events: inout [Event]) {
        for b in blocks where b.ssrc == ssrc {
            if b.fractionLost > 0 { protection.lossSeen(now: now) }
            let s = reports.received(b, now: now)
            statistics.receiver = s
            if let rtt = s.roundTripTime { statistics.roundTripTime = rtt }
            events.append(.receiverReport(s))
        }
    }

    private mutating func handleNACK(_ seq: UInt16, now: Instant, into events: inout [Event]) {
        switch history.resend(seq, now: now, rtt: statistics.roundTripTime ?? configuration.initialRTT) {
        case .resend(let p):
            pacer.enqueue(PacedPacket(packet: p, captureTime: now, isRetransmission: true),
                          size: p.encodedLength + (rtx == nil ? 0 : 2), urgent: true)
            events.append(.retransmit(sequenceNumber: seq))
        case .unknown, .rateLimited:
            statistics.nacksIgnored += 1
        }
    }
}
