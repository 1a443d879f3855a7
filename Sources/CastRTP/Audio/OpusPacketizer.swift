import CastCore

/// RTP for Opus (RFC 7587): one Opus packet per RTP packet, timestamps on a
/// 48 kHz clock counted in samples, the marker bit on the first packet of a
/// talkspurt only. Pure: the caller says how many samples each packet holds
/// and how many were lost before it; nothing here reads a clock.
///
/// Timestamps count samples, not wall time (RFC 7587 §4.1: the timestamp
/// advances by the packet's duration at 48 kHz whatever the sampling rate of
/// the input). Samples the capture buffer dropped still advance it, so the
/// receiver sees a gap of the right length and lip sync survives an overflow.
public struct OpusPacketizer: Sendable {
    /// RFC 7587 §4.1: the RTP clock rate is 48 000 Hz for every Opus stream.
    public static let clockRate: UInt32 = 48_000
    /// RFC 6716 §2.1.4 and §3.2.5: 2.5 ms is Opus's shortest frame, 120 ms its longest packet (at 48 kHz).
    public static let samplesPerPacket: ClosedRange<Int> = 120...5760

    public let ssrc: UInt32
    public let payloadType: UInt8
    public private(set) var nextSequenceNumber: UInt16
    /// The timestamp the next packet gets when no samples are skipped before it.
    public private(set) var nextTimestamp: UInt32
    private var started = false

    public init(payloadType: UInt8, ssrc: UInt32, initialSequenceNumber: UInt16, initialTimestamp: UInt32) throws {
        guard payloadType < 128 else { throw CastError(.usage, "RTP payload type \(payloadType) does not fit in 7 bits") }
        self.payloadType = payloadType
        self.ssrc = ssrc
        nextSequenceNumber = initialSequenceNumber
        nextTimestamp = initialTimestamp
    }

    /// The RTP packet carrying `opus`, which holds `samples` samples per channel;
    /// `skippedBefore` samples were lost between the previous packet and this one.
    public mutating func packetize(_ opus: [UInt8], samples: Int, skippedBefore: Int = 0) throws -> RTPPacket {
        // RFC 6716 §3.1: every Opus packet has at least its TOC byte.
        guard !opus.isEmpty else { throw CastError(.usage, "an Opus packet has at least one byte (its TOC)") }
        guard Self.samplesPerPacket.contains(samples) else {
            throw CastError(.usage, "an Opus packet holds 120 to 5760 samples per channel at 48 kHz, not \(samples)")
        }
        guard skippedBefore >= 0 else { throw CastError(.usage, "skipped samples cannot be negative (\(skippedBefore))") }
        let timestamp = nextTimestamp &+ UInt32(truncatingIfNeeded: skippedBefore)
        // RFC 7587 §4.1 with RFC 3551 §4.1: M marks the first packet after
        // silence; without DTX that is the first packet, and the first after a gap.
        let marker = !started || skippedBefore > 0
        let header = RTPHeader(marker: marker, payloadType: payloadType, sequenceNumber: nextSequenceNumber,
                               timestamp: timestamp, ssrc: ssrc)
        started = true
        nextSequenceNumber &+= 1
        nextTimestamp = timestamp &+ UInt32(samples)
        return RTPPacket(header: header, payload: opus)
    }
}
