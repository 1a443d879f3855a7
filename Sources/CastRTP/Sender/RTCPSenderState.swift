import CastCore

/// What the receiver's report blocks say about our stream (RFC 3550 §6.4.1).
public struct ReceiverStatistics: Equatable, Sendable {
    /// Fraction of packets lost since the previous report, 0…1.
    public var fractionLost: Double
    public var cumulativeLost: Int32
    public var extendedHighestSequence: UInt32
    /// Interarrival jitter converted from 90 kHz units.
    public var jitter: Duration
    /// Round-trip time from LSR/DLSR (§6.4.1), when the block refers to an SR we sent.
    public var roundTripTime: Duration?
}

/// The sender side of RTCP: counts what was sent, says when the next sender
/// report is due (about once a second; the randomisation of §6.3 is not
/// needed for one sender and one receiver), builds SR + SDES CNAME, and turns
/// report blocks into loss, jitter and RTT.
public struct RTCPSenderState: Sendable {
    public let ssrc: UInt32
    public let cname: String
    public let interval: Duration
    /// Unix time at monotonic zero, for the SR's NTP timestamp.
    public let wallclockOffset: Duration
    public let clockRate: UInt32

    public private(set) var packetCount: UInt32 = 0
    /// Payload octets, as §6.4.1 defines the sender's octet count.
    public private(set) var octetCount: UInt32 = 0
    public private(set) var nextReportAt: Instant?
    public private(set) var latest: ReceiverStatistics?
    public private(set) var roundTripTime: Duration?

    private var lastRTPTimestamp: UInt32 = 0
    private var lastCaptureTime: Instant?
    /// Compact NTP of recent SRs and when they left, to match LSR (§6.4.1).
    private var sentReports: [(compact: UInt32, at: Instant)] = []
    /// The SDES CNAME that follows each SR, built once (issue 19: not a new one per report).
    private let sourceDescription: SourceDescription

    public init(ssrc: UInt32, cname: String, interval: Duration = .seconds(1), wallclockOffset: Duration,
                clockRate: UInt32 = RTPConstants.videoClockRate) {
        self.ssrc = ssrc
        self.cname = cname
        self.interval = interval
        self.wallclockOffset = wallclockOffset
        self.clockRate = clockRate
        sourceDescription = SourceDescription(ssrc: ssrc, cname: cname)
        sentReports.reserveCapacity(17)
    }

    /// Counts a packet sent on our SSRC; the first one makes an SR due at once.
    /// A plain retransmission counts but does not move the timestamp mapping.
    public mutating func packetSent(payloadLength: Int, rtpTimestamp: UInt32, captureTime: Instant, now: Instant,
                                    isRetransmission: Bool = false) {
        packetCount &+= 1
        octetCount &+= UInt32(truncatingIfNeeded: payloadLength)
        if !isRetransmission, lastCaptureTime == nil || lastRTPTimestamp != rtpTimestamp {
            lastRTPTimestamp = rtpTimestamp
            lastCaptureTime = captureTime
        }
        if nextReportAt == nil { nextReportAt = now }
    }

    /// The RTP timestamp that corresponds to `now` (§6.4.1: same instant as the NTP field).
    func rtpTimestamp(at now: Instant) -> UInt32 {
        guard let origin = lastCaptureTime else { return 0 }
        return lastRTPTimestamp &+ RTPClock.ticks(nanoseconds: now.nanoseconds &- origin.nanoseconds, rate: clockRate)
    }

    /// Whether an SR is due at `now` (`poll` and `pollCompound` give one).
    public func isReportDue(now: Instant) -> Bool {
        guard let due = nextReportAt else { return false }
        return now >= due
    }

    /// The SR + SDES compound due at `now`, if one is due.
    public mutating func poll(now: Instant) -> [RTCPPacket]? {
        guard let sr = nextReport(now: now) else { return nil }
        return [.senderReport(sr), .sourceDescription(sourceDescription)]
    }

    /// The same compound as `poll`, written straight into `buffer`'s storage (moved in, a
    /// `BufferPool`'s: no array of packets and no new SDES, so no allocation while the
    /// buffer has `capacity` bytes and nothing else references it; issue 19). nil, and the
    /// buffer let go, when no report is due: ask `isReportDue` first to keep it.
    public mutating func pollCompound(now: Instant, into buffer: consuming [UInt8], capacity: Int = 128) -> [UInt8]? {
        guard let sr = nextReport(now: now) else { return nil }
        var w = ByteWriter(reusing: consume buffer, capacity: capacity)
        // Neither can throw: no report blocks, and a CNAME of ours (RFC 7022: 16 characters).
        guard (try? RTCPPacket.write(sr, into: &w)) != nil, (try? RTCPPacket.write(sourceDescription, into: &w)) != nil
        else { return nil }
        return w.take()
    }

    /// The SR due at `now`, remembered for RTT; nil when none is due.
    private mutating func nextReport(now: Instant) -> SenderReport? {
        guard let due = nextReportAt, now >= due else { return nil }
        nextReportAt = max(due + interval, now)
        let ntp = NTPTime(now, wallclockOffset: wallclockOffset)
        sentReports.append((ntp.compact, now))
        if sentReports.count > 16 { sentReports.removeFirst() }
        return SenderReport(ssrc: ssrc, ntpTime: ntp, rtpTimestamp: rtpTimestamp(at: now),
                            packetCount: packetCount, octetCount: octetCount)
    }

    /// Reads a report block about our SSRC (§6.4.1); RTT = A − LSR − DLSR, with
    /// A and LSR both taken on our own clock from the SR we remember.
    public mutating func received(_ block: ReportBlock, now: Instant) -> ReceiverStatistics {
        var rtt: Duration? = nil
        if block.lastSenderReport != 0, let sent = sentReports.last(where: { $0.compact == block.lastSenderReport }) {
            let d = (now - sent.at) - CompactNTPDuration.duration(block.delaySinceLastSenderReport)
            rtt = d < .zero ? .zero : d
            roundTripTime = rtt
        }
        let jitterNs = Int64(block.jitter) * 1_000_000_000 / Int64(clockRate)
        let stats = ReceiverStatistics(fractionLost: Double(block.fractionLost) / 256,
                                       cumulativeLost: block.cumulativeLost,
                                       extendedHighestSequence: block.extendedHighestSequence,
                                       jitter: .nanoseconds(jitterNs), roundTripTime: rtt)
        latest = stats
        return stats
    }
}
