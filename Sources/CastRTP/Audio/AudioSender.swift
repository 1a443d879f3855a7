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
        /// Spare capacity each datagram is built with, so that SRTP appends its trailer in
        /// place (`SRTPProtector.trailerCapacity`; issue 19).
        public var trailerCapacity: Int

        public init(payloadType: UInt8, cname: String, extensionIDs: ExtensionIDs = ExtensionIDs(),
                    srtpOverhead: Int = 16, reportInterval: Duration = .seconds(1), wallclockOffset: Duration,
                    trailerCapacity: Int = 0) {
            self.payloadType = payloadType
            self.cname = cname
            self.extensionIDs = extensionIDs
            self.srtpOverhead = srtpOverhead
            self.reportInterval = reportInterval
            self.wallclockOffset = wallclockOffset
            self.trailerCapacity = max(0, trailerCapacity)
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
    private var outputs = OutputQueue<Output>()
    /// Sender reports, and the buffers of sent datagrams given back by the owner
    /// (`recycle`) that later packets and reports are built in.
    private var reporter: SenderReporter
    /// What a pooled buffer holds: a 20 ms Opus frame at up to ~100 kbit/s with its
    /// header, extensions and SRTP's trailer (a larger frame grows its buffer once).
    static let bufferBytes = 320

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
        reporter = SenderReporter(
            reports: RTCPSenderState(ssrc: ssrc, cname: configuration.cname, interval: configuration.reportInterval,
                                     wallclockOffset: configuration.wallclockOffset, clockRate: OpusPacketizer.clockRate),
            buffers: BufferPool(limit: 8, minimumCapacity: Self.bufferBytes + configuration.trailerCapacity))
    }

    /// Bytes the RTP packet of `frame` takes on the wire, SRTP tag included:
    /// the size to register its transport-wide sequence number under.
    public func packetSize(of frame: EncodedAudioFrame) -> Int {
        let ext = extensions(transportSequence: 0, level: frame.level).encodedLength
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
        if let report = reporter.reportIfDue(now: now) {
            statistics.senderReportsSent += 1
            outputs.push(.transmit(report))
        }
    }

    /// A datagram's bytes back once they are sent: later packets are built in them (bytes
    /// still referenced elsewhere get storage of their own first, copy on write). Too small
    /// a buffer, or one past the pool's bound, is let go.
    public mutating func recycle(_ bytes: consuming [UInt8]) { reporter.recycle(consume bytes) }

    /// Whether `recycle` would keep a buffer of `capacity` bytes now.
    public func wantsBuffer(capacity: Int) -> Bool { reporter.wantsBuffer(capacity: capacity) }

    /// Datagram buffers reused from `recycle`, and ones made new (tests).
    public var bufferCounts: (reused: Int, made: Int) { reporter.bufferCounts }

    /// The next output, datagrams and events in the order they were decided; nil when drained.
    public mutating func poll() -> Output? { outputs.pop() }

    /// When the next sender report is due (nil: only after new input).
    public func nextDeadline() -> Instant? { reporter.reports.nextReportAt }

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
        let packet = try packetizer.packetize(frame.opus, samples: frame.samples, skippedBefore: frame.skippedBefore)
        // Extensions stamped inline, the packet written into a pooled buffer with room for
        // SRTP's trailer: no allocation in steady state (issue 19).
        let bytes = try packet.serialize(extensions: extensions(transportSequence: transportSequence, level: frame.level),
                                         trailerCapacity: configuration.trailerCapacity, into: reporter.takeBuffer())
        reporter.reports.packetSent(payloadLength: packet.payloadLength, rtpTimestamp: packet.header.timestamp,
                           captureTime: frame.captureTime, now: now)
        statistics.framesSent += 1
        statistics.bytesSent += bytes.count
        statistics.skippedSamples += frame.skippedBefore
        outputs.push(.transmit(.rtp(bytes)))
    }

    /// The negotiated extensions' elements, inline (empty when none). The audio level is
    /// sent only when the frame has one.
    private func extensions(transportSequence: UInt16?, level: UInt8?) -> RTPInlineExtensions {
        let ids = configuration.extensionIDs
        var stamps = RTPInlineExtensions()
        if let id = ids.transportCC, let seq = transportSequence { stamps.append(id: id, value: UInt32(seq), length: 2) }
        if let id = ids.audioLevel, let level {
            // Voice activity: anything above −127 dBov is "sound" for desktop audio.
            let v = RTPExtensionValue.audioLevelValue(minusDBov: level, voiceActivity: level < 127)
            stamps.append(id: id, value: UInt32(v), length: 1)
        }
        return stamps
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
                let s = reporter.reports.received(b, now: now)
                statistics.receiver = s
                if let rtt = s.roundTripTime { statistics.roundTripTime = rtt }
                outputs.push(.event(.receiverReport(s)))
            }
        }
    }
}
