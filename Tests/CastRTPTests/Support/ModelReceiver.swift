import CastCore
@testable import CastRTP

/// A receiver as Chrome behaves towards a sender, reduced to what congestion
/// control sees: transport-cc feedback every 100 ms (when negotiated), NACKs
/// for gaps (Chrome style: at once, then again every RTT, or webrtcbin style:
/// also for packets merely late), RRs every second with fraction lost and
/// LSR/DLSR, and optionally REMB (aiortc style, with no transport-cc).
struct ModelReceiver {
    enum NACKStyle { case none, chrome }

    let mediaSSRC: UInt32
    let rtxSSRC: UInt32?
    var transportCCID: UInt8?
    var nackStyle = NACKStyle.chrome
    /// REMB value to send with each RR (aiortc's receiver estimate, as a fixed cap here).
    var remb: UInt64?
    /// Added to `now` for the receiver's clock (transport-cc reference time).
    var clockOffset: Duration = .seconds(100)
    var feedbackInterval: Duration = .milliseconds(100)

    // transport-cc
    private var arrivals: [UInt16: Instant] = [:]
    private var nextBase: UInt16?
    private var highestTCC: UInt16?
    private var feedbackCount: UInt8 = 0
    private var nextFeedbackAt: Instant?
    // media sequence tracking
    private var received: Set<UInt16> = []
    private var highest: UInt16?
    private var missing: [UInt16: (since: Instant, nacked: Instant?, count: Int)] = [:]
    private var expectedInInterval = 0
    private var receivedInInterval = 0
    private var lastSR: (compact: UInt32, at: Instant)?
    private var nextRRAt: Instant?

    private(set) var mediaPackets = 0
    private(set) var rtxPackets = 0
    private(set) var nacksSent = 0
    private(set) var mediaBytes = 0
    /// (arrival, bytes) of every packet, for rate measurements.
    private(set) var log: [(at: Instant, bytes: Int)] = []
    /// When the last packet of each frame to arrive (retransmissions included) arrived, by RTP
    /// timestamp, and the timestamp of the first media packet (the first frame's).
    private(set) var frameLastArrival: [UInt32: Instant] = [:]
    private(set) var firstTimestamp: UInt32?

    init(mediaSSRC: UInt32, rtxSSRC: UInt32?, transportCCID: UInt8?) {
        self.mediaSSRC = mediaSSRC
        self.rtxSSRC = rtxSSRC
        self.transportCCID = transportCCID
    }

    /// A datagram arrived; returns RTCP to send back at once (NACKs).
    mutating func receive(_ bytes: [UInt8], now: Instant) throws -> [[UInt8]] {
        if bytes.count > 1, bytes[1] >= 200, bytes[1] <= 206 {
            for p in try RTCPCompound.parse(bytes) {
                if case .senderReport(let sr) = p { lastSR = (sr.ntpTime.compact, now) }
            }
            return []
        }
        var p = try RTPPacket.parse(bytes)
        log.append((now, bytes.count))
        if let id = transportCCID, let d = p.header.extensions?.element(id: id) {
            let seq = try RTPExtensionValue.parseTransportSequence(d)
            if arrivals[seq] == nil { arrivals[seq] = now }
            // A late packet before the window moves its start back, so it is reported
            // (again, with its neighbours: libwebrtc's RemoteEstimatorProxy does the same).
            if let b = nextBase { if b &- seq < 0x8000, b != seq { nextBase = seq } } else { nextBase = seq }
            if let h = highestTCC { if seq &- h < 0x8000 { highestTCC = seq } } else { highestTCC = seq }
        }
        if p.header.ssrc == rtxSSRC {
            rtxPackets += 1
            p = try RTXEncoder.unwrap(p, originalSSRC: mediaSSRC, originalPayloadType: p.header.payloadType)
            frameLastArrival[p.header.timestamp] = now
            missing[p.header.sequenceNumber] = nil
            received.insert(p.header.sequenceNumber)
            return []
        }
        guard p.header.ssrc == mediaSSRC else { return [] }
        mediaPackets += 1
        mediaBytes += bytes.count
        if firstTimestamp == nil { firstTimestamp = p.header.timestamp }
        frameLastArrival[p.header.timestamp] = now
        let seq = p.header.sequenceNumber
        let wasMissing = missing.removeValue(forKey: seq) != nil
        if !wasMissing { receivedInInterval += 1 }
        received.insert(seq)
        var newGap: [UInt16] = []
        if let h = highest {
            let ahead = seq &- h
            if ahead != 0, ahead < 0x8000 {
                var s = h &+ 1
                while s != seq { missing[s] = (now, nil, 0); newGap.append(s); s &+= 1 }
                highest = seq
                expectedInInterval += Int(ahead)
            }
        } else {
            highest = seq
            expectedInInterval += 1
        }
        if received.count > 4096 { received.removeAll() }
        switch nackStyle {
        case .none: return []
        case .chrome:
            guard !newGap.isEmpty else { return [] }
            for s in newGap { missing[s]?.nacked = now; missing[s]?.count = 1 }
            nacksSent += 1
            return [try RTCPCompound.serialize([.nack(GenericNACK(senderSSRC: 9, mediaSSRC: mediaSSRC, lost: newGap))])]
        }
    }

    /// Periodic feedback due at `now` (transport-cc, repeated NACKs, RR + REMB).
    mutating func tick(now: Instant, rtt: Duration) throws -> [[UInt8]] {
        var out: [[UInt8]] = []
        if transportCCID != nil {
            let due = nextFeedbackAt ?? now + feedbackInterval
            nextFeedbackAt = due
            if now >= due {
                nextFeedbackAt = now + feedbackInterval
                if let fb = feedback() { out.append(try RTCPCompound.serialize([.transportCC(fb)])) }
            }
        }
        // Chrome re-NACKs a packet still missing after an RTT, up to 10 times, for a second.
        if case .chrome = nackStyle {
            var again: [UInt16] = []
            for (s, m) in missing {
                if now - m.since > .seconds(1) || m.count >= 10 { missing[s] = nil; continue }
                if let n = m.nacked, now - n >= max(rtt, .milliseconds(20)) {
                    again.append(s)
                    missing[s] = (m.since, now, m.count + 1)
                }
            }
            if !again.isEmpty {
                nacksSent += 1
                out.append(try RTCPCompound.serialize([.nack(GenericNACK(senderSSRC: 9, mediaSSRC: mediaSSRC, lost: again.sorted()))]))
            }
        } else {
            for (s, m) in missing where now - m.since > .seconds(1) { missing[s] = nil }
        }
        let rrDue = nextRRAt ?? now + .seconds(1)
        nextRRAt = rrDue
        if now >= rrDue {
            nextRRAt = now + .seconds(1)
            let lost = max(0, expectedInInterval - receivedInInterval)
            let fraction = expectedInInterval > 0 ? UInt8(min(255, lost * 256 / expectedInInterval)) : 0
            expectedInInterval = 0
            receivedInInterval = 0
            let block = ReportBlock(ssrc: mediaSSRC, fractionLost: fraction, cumulativeLost: 0,
                                    extendedHighestSequence: UInt32(highest ?? 0), jitter: 0,
                                    lastSenderReport: lastSR?.compact ?? 0,
                                    delaySinceLastSenderReport: lastSR.map { CompactNTPDuration.units(now - $0.at) } ?? 0)
            var packets: [RTCPPacket] = [.receiverReport(ReceiverReport(ssrc: 9, reports: [block]))]
            if let r = remb { packets.append(.remb(ReceiverEstimatedMaxBitrate(senderSSRC: 9, bitrate: r, ssrcs: [mediaSSRC]))) }
            out.append(try RTCPCompound.serialize(packets))
        }
        return out
    }

    var nextTick: Instant? {
        [nextFeedbackAt, nextRRAt].compactMap { $0 }.min()
    }

    /// transport-cc feedback for everything from the last base to the highest seen (Chrome's shape).
    private mutating func feedback() -> TransportCCFeedback? {
        guard let base = nextBase, let high = highestTCC, high &- base < 0x8000 else { return nil }
        let count = Int(high &- base) + 1
        var deltas: [Int16?] = []
        deltas.reserveCapacity(count)
        var reference: Int64?
        var last: Int64 = 0
        for i in 0..<count {
            let s = base &+ UInt16(i)
            guard let at = arrivals[s] else { deltas.append(nil); continue }
            let t = (at + clockOffset).nanoseconds
            if reference == nil {
                let r = t / TransportCCFeedback.referenceUnitNanoseconds
                reference = r
                last = r * TransportCCFeedback.referenceUnitNanoseconds
            }
            let d = (t - last) / TransportCCFeedback.deltaUnitNanoseconds
            let clamped = Int16(clamping: d)
            deltas.append(clamped)
            last += Int64(clamped) * TransportCCFeedback.deltaUnitNanoseconds
        }
        // Arrivals are kept a second, for late packets that move the window back.
        if let newest = arrivals[high] { arrivals = arrivals.filter { newest - $0.value < .seconds(1) } }
        guard let ref = reference else { return nil }
        nextBase = high &+ 1
        feedbackCount &+= 1
        return TransportCCFeedback(senderSSRC: 9, mediaSSRC: mediaSSRC, baseSequenceNumber: base,
                                   referenceTime: Int32(truncatingIfNeeded: ref & 0x7f_ffff),
                                   feedbackPacketCount: feedbackCount, receiveDeltas: deltas)
    }

    /// Received bits per second over [from, to).
    func rate(from: Instant, to: Instant) -> Int64 {
        let bytes = log.filter { $0.at >= from && $0.at < to }.reduce(0) { $0 + $1.bytes }
        return Int64(bytes) * 8_000_000_000 / max((to - from).totalNanoseconds, 1)
    }
}
