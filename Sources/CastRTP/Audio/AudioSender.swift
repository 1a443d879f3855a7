import CastCore

/// One encoded audio frame, as the audio thread hands it to the sender.
public struct EncodedAudioFrame: Sendable, Equatable {
    /// One Opus packet (RFC 7587 §4.2: it fills one RTP payload).
    public var opus: [UInt8]
    /// Samples per channel it holds, at 48 kHz (960 for 20 ms).
    public var samples: Int
    /// When its first sample was captured, on the monotonic clock (the SR's NTP↔RTP mapping rests on it).
    public var captureTime: Instant
    /// Samples the capture buffer dropped since the previous frame (0 normally).
    public var skippedBefore: Int
    /// RFC 6464 level in −dBov (0…127), sent when the audio-level extension is negotiated.
    public var level: UInt8?

    public init(opus: [UInt8], samples: Int, captureTime: Instant, skippedBefore: Int = 0, level: UInt8? = nil) {
        self.opus = opus
        self.samples = samples
        self.captureTime = captureTime
        self.skippedBefore = skippedBefore
        self.level = level
    }
}

/// The audio send path: Opus frames in → RTP datagrams (RFC 7587) with their
/// header extensions; RTCP in → receiver statistics; RTCP sender reports out.
///
/// Sans-IO, the one contract (`SansIO` in CastCore): `handle(_:now:)` with an
/// input, then `poll()` until nil (outputs in decision order), then
/// `handleTimeout(now:)` at `nextDeadline()` (a sender report is due; nil: only
/// when new input arrives). Nothing here reads a clock, sleeps or touches a
/// socket; SRTP and ICE wrap the datagrams. A frame it cannot send is an
/// `.event(.frameRejected)`, not a thrown error.
///
/// Audio is not paced: a frame is one small packet every 20 ms, sent at once
/// (a pacer queue behind a video keyframe would delay it by up to its drain
/// time, and late audio is concealed audio). No NACK/RTX: Opus recovers with
/// in-band FEC and concealment; a resent 20 ms frame would arrive too late to play.
///
/// Lip sync: the sender reports map RTP time to NTP time through
/// `wallclockOffset`, which must be the one `VideoSender` uses, and carry
/// the same CNAME (RFC 3550 §6.5.1: a receiver syncs streams of one CNAME).
///
/// The transport-wide sequence number (draft-holmer-rmcat-transport-wide-cc-
/// extensions-01) comes with each frame from the caller: one allocator counts
/// audio and video together (the congestion controller's), so this sender has
/// none. `packetSize(of:)` gives the size to register it under.
public struct AudioSender: Sendable, SansIO {
    public typealias Datagram = VideoSender.Datagram

    public struct ExtensionIDs: Sendable, Equatable {
        public var transportCC: UInt8?
        public var audioLevel: UInt8?
        public init(transportCC: UInt8? = nil, audioLevel: UInt8? = nil) {
            self.transportCC = transportCC
            self.audioLevel = audioLevel
        }
    }

    public struct Configuration: Sendable {
        /// The payload type the answer kept for `opus/48000/2` (commonly 111).
        public var payloadType: UInt8
        /// The CNAME of the video stream (lip sync needs the same one).
        public var cname: String
        public var extensionIDs: ExtensionIDs
        public var srtpOverhead: Int
        public var reportInterval: Duration
        /// Unix time at monotonic zero: the value `VideoSender.Configuration.wallclockOffset` holds.
        public var wallclockOffset: Duration

        public init(payloadType: UInt8, cname: String, extensionIDs: ExtensionIDs = ExtensionIDs(),
                    srtpOverhead: Int = 16, reportInterval: Duration = .seconds(1), wallclockOffset: Duration) {
            self.payloadType = payloadType
            self.cname = cname
            self.extensionIDs = extensionIDs
            self.srtpOverhead = srtpOverhead
            self.reportInterval = reportInterval
            self.wallclockOffset = wallclockOffset
        }
    }

    public enum Input: Sendable, Equatable {
        /// A frame to send; `transportSequenceNumber` is required when transport-cc is negotiated.
        case frame(EncodedAudioFrame, transportSequenceNumber: UInt16?)
        /// One RTCP datagram from the receiver (compound or reduced-size).
        case rtcp([UInt8])
    }

    public enum Event: Sendable, Equatable {
        /// A report block about our SSRC: loss (feeds the encoder's expected loss), jitter, RTT.
        case receiverReport(ReceiverStatistics)
        /// A frame that could not be sent (empty, an impossible sample count, or no
        /// transport-wide sequence number while transport-cc is negotiated): nothing left.
        case frameRejected(CastError)
    }

    public enum Output: Sendable, Equatable {
        case transmit(Datagram)
        case event(Event)
    }

    public struct Statistics: Sendable, Equatable {
        public var framesSent = 0
        public var bytesSent = 0
        /// Samples skipped by the capture buffer, as timestamp gaps.
        public var skippedSamples = 0
        public var senderReportsSent = 0
        public var malformedRTCP = 0
        public var roundTripTime: Duration?
        public var receiver: ReceiverStatistics?
    }

    public let configuration: Configuration
    public private(set) var statistics = Statistics()
    private var packetizer: OpusPacketizer
    private var reports: RTCPSenderState
    private var outputs = OutputQueue<Output>()

    public var ssrc: UInt32 { packetizer.ssrc }

    /// A sender with the SSRC the offer announced, and random sequence and timestamp starts (RFC 3550 §5.1).
    public init(configuration: Configuration, ssrc: UInt32, random: inout some RandomNumberGenerator) throws {
        try self.init(configuration: configuration, ssrc: ssrc,
                      initialSequenceNumber: UInt16.random(in: 0...UInt16.max, using: &random),
                      initialTimestamp: UInt32.random(in: 0...UInt32.max, using: &random))
    }

    public init(configuration: Configuration, ssrc: UInt32, initialSequenceNumber: UInt16,
                initialTimestamp: UInt32) throws {
        self.configuration = configuration
        packetizer = try OpusPacketizer(payloadType: configuration.payloadType, ssrc: ssrc,
                                        initialSequenceNumber: initialSequenceNumber, initialTimestamp: initialTimestamp)
        reports = RTCPSenderState(ssrc: ssrc, cname: configuration.cname, interval: configuration.reportInterval,
                                  wallclockOffset: configuration.wallclockOffset, clockRate: OpusPacketizer.clockRate)
    }

    /// Bytes the RTP packet of `frame` takes on the wire, SRTP tag included:
    /// the size to register its transport-wide sequence number under.
    public func packetSize(of frame: EncodedAudioFrame) -> Int {
        let ext = extensionBlock(transportSequence: 0, level: frame.level)?.encodedLength ?? 0
        return RTPHeader.fixedLength + ext + frame.opus.count + configuration.srtpOverhead
    }

    // MARK: In

    /// Takes one input; then drain `poll()`. A frame the packetizer refuses (empty, or an
    /// impossible sample count) sends nothing and comes out as `.event(.frameRejected)`.
    public mutating func handle(_ input: Input, now: Instant) {
        switch input {
        case .frame(let frame, let transportSequence):
            do { try send(frame, transportSequence: transportSequence, now: now) }
            catch { outputs.push(.event(.frameRejected(error as? CastError ?? CastError(.usage, "\(error)")))) }
        case .rtcp(let bytes):
            handleRTCP(bytes, now: now)
        }
    }

    /// A sender report when one is due (calling it early or twice is harmless).
    public mutating func handleTimeout(now: Instant) {
        if let compound = reports.poll(now: now), let bytes = try? RTCPCompound.serialize(compound) {
            statistics.senderReportsSent += 1
            outputs.push(.transmit(.rtcp(bytes)))
        }
    }

    /// The next output, datagrams and events in the order they were decided; nil when drained.
    public mutating func poll() -> Output? { outputs.pop() }

    /// When the next sender report is due (nil: only after new input).
    public func nextDeadline() -> Instant? { reports.nextReportAt }

    /// An RTCP BYE for our SSRC (RFC 3550 §6.6), for a clean stop.
    public func goodbye(reason: String = "") -> Datagram? {
        guard let bytes = try? RTCPCompound.serialize([
            .receiverReport(ReceiverReport(ssrc: ssrc)), .goodbye(Goodbye(sources: [ssrc], reason: reason)),
        ]) else { return nil }
        return .rtcp(bytes)
    }

    // MARK: Internals

    private mutating func send(_ frame: EncodedAudioFrame, transportSequence: UInt16?, now: Instant) throws {
        if configuration.extensionIDs.transportCC != nil, transportSequence == nil {
            throw CastError(.usage, "transport-cc is negotiated: each audio frame needs its transport-wide sequence number")
        }
        var packet = try packetizer.packetize(frame.opus, samples: frame.samples, skippedBefore: frame.skippedBefore)
        packet.header.extensions = extensionBlock(transportSequence: transportSequence, level: frame.level)
        let bytes = try packet.serialize()
        reports.packetSent(payloadLength: packet.payload.count, rtpTimestamp: packet.header.timestamp,
                           captureTime: frame.captureTime, now: now)
        statistics.framesSent += 1
        statistics.bytesSent += bytes.count
        statistics.skippedSamples += frame.skippedBefore
        outputs.push(.transmit(.rtp(bytes)))
    }

    /// The extension block for the negotiated extensions (nil when none). The
    /// audio level is sent only when the frame has one.
    private func extensionBlock(transportSequence: UInt16?, level: UInt8?) -> RTPExtensionBlock? {
        let ids = configuration.extensionIDs
        var elements: [RTPHeaderExtension] = []
        if let id = ids.transportCC, let seq = transportSequence {
            elements.append(RTPHeaderExtension(id: id, data: RTPExtensionValue.transportSequence(seq)))
        }
        if let id = ids.audioLevel, let level {
            // Voice activity: anything above −127 dBov is "sound" for desktop audio.
            elements.append(RTPHeaderExtension(id: id, data: RTPExtensionValue.audioLevel(minusDBov: level,
                                                                                          voiceActivity: level < 127)))
        }
        return elements.isEmpty ? nil : RTPExtensionBlock.best(for: elements)
    }

    private mutating func handleRTCP(_ bytes: [UInt8], now: Instant) {
        guard let packets = try? RTCPCompound.parse(bytes) else {
            statistics.malformedRTCP += 1
            return
        }
        for p in packets {
            let blocks: [ReportBlock]
            switch p {
            case .receiverReport(let rr): blocks = rr.reports
            case .senderReport(let sr): blocks = sr.reports
            default: continue   // transport-cc feedback belongs to the congestion controller; no NACK for audio
            }
            for b in blocks where b.ssrc == ssrc {
                let s = reports.received(b, now: now)
                statistics.receiver = s
                if let rtt = s.roundTripTime { statistics.roundTripTime = rtt }
                outputs.push(.event(.receiverReport(s)))
            }
        }
    }
}
