import CastCore

/// The packets sent in the last ~second, keyed by sequence number, so that a
/// NACK (RFC 4585 §6.2.1) can be answered by a retransmission. Bounded by age,
/// count and bytes, whichever bites first; the oldest packets go first.
public struct PacketHistory: Sendable {
    public struct Limits: Sendable, Equatable {
        public var maxAge: Duration
        public var maxPackets: Int
        public var maxBytes: Int
        /// Issue 4 sized it for ~1 s of media; the age is 3 s because a receiver may NACK a
        /// lost retransmission again only when its next loss shows up (aiortc does), which at
        /// a screen's low packet rate can be more than a second later (Scripts/faults, 5–10 %
        /// loss: 3–4 s freezes). At a high rate the next loss comes within milliseconds, so the
        /// bytes bound it instead: 600 kB is 1.2 s at the 4 Mbit/s cap, longer than libwebrtc's
        /// sender keeps its packets (`RtpPacketHistory`: 1 s, or 3 RTTs when longer) and than
        /// Chromium's or webrtcbin's receivers go on asking, and 3 s up to 1.6 Mbit/s. The
        /// history holds its packets' access units, so this is also its share of castd's
        /// memory (issue 19: 3 s at 4 Mbit/s kept 1.5 MB).
        public init(maxAge: Duration = .seconds(3), maxPackets: Int = 2048, maxBytes: Int = 600_000) {
            self.maxAge = maxAge
            self.maxPackets = maxPackets
            self.maxBytes = maxBytes
        }
    }

    struct Entry: Sendable {
        var packet: RTPPacket
        var sentAt: Instant
        var lastResentAt: Instant?
        var serial: UInt64
    }

    public enum ResendDecision: Equatable, Sendable {
        case resend(RTPPacket)
        /// Not held any more (too old, evicted, or never sent).
        case unknown
        /// Already resent less than one RTT ago: the first copy may still arrive.
        case rateLimited
    }

    public let limits: Limits
    private var entries: [UInt16: Entry] = [:]
    /// Send order, oldest first. The serial tells a live slot
    /// from one whose sequence number was inserted again later.
    private var order = RingBuffer<(seq: UInt16, serial: UInt64)>()
    private var nextSerial: UInt64 = 0
    public private(set) var byteCount = 0

    public init(limits: Limits = Limits()) { self.limits = limits }

    public var count: Int { entries.count }

    /// Records a packet as sent at `now` (a later insert of the same number replaces it).
    public mutating func insert(_ packet: RTPPacket, sentAt now: Instant) {
        let seq = packet.header.sequenceNumber
        if let old = entries.removeValue(forKey: seq) { byteCount -= old.packet.payloadLength }
        nextSerial += 1
        entries[seq] = Entry(packet: packet, sentAt: now, serial: nextSerial)
        order.append((seq, nextSerial))
        byteCount += packet.payloadLength
        evict(now: now)
    }

    /// Drops packets past the age limit, and the oldest ones beyond the count or byte limit.
    public mutating func evict(now: Instant) {
        while let slot = order.first {
            guard let e = entries[slot.seq], e.serial == slot.serial else { order.popFirst(); continue }
            guard now - e.sentAt > limits.maxAge || entries.count > limits.maxPackets || byteCount > limits.maxBytes
            else { break }
            entries[slot.seq] = nil
            byteCount -= e.packet.payloadLength
            order.popFirst()
        }
    }

    public func packet(_ seq: UInt16) -> RTPPacket? { entries[seq]?.packet }

    /// When `seq` was first sent (nil when not held).
    public func sentAt(_ seq: UInt16) -> Instant? { entries[seq]?.sentAt }

    /// Decides whether to resend `seq` for a NACK at `now`. A packet is resent
    /// at most once per `rtt` (the first resend may still be in flight).
    public mutating func resend(_ seq: UInt16, now: Instant, rtt: Duration) -> ResendDecision {
        evict(now: now)
        guard var e = entries[seq] else { return .unknown }
        if let last = e.lastResentAt, now - last < rtt { return .rateLimited }
        e.lastResentAt = now
        entries[seq] = e
        return .resend(e.packet)
    }
}
