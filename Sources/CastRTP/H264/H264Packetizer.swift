import CastCore

/// Turns H.264 access units (Annex-B) into RTP packets (RFC 6184,
/// packetization-mode=1): single NAL unit packets, STAP-A aggregates and FU-A
/// fragments, a marker on the last packet of each access unit, 90 kHz
/// timestamps from the capture time. Pure: randomness arrives at init, time as
/// a parameter.
public struct H264Packetizer: Sendable {
    /// MTU and overheads: shared with the VP8 packetizer.
    public typealias Configuration = PacketizerConfiguration

    /// What one access unit became.
    public struct Output: Equatable, Sendable {
        public var packets: [RTPPacket]
        /// The access unit carries an IDR slice.
        public var isKeyframe: Bool
        /// SPS/PPS had to be inserted from memory in front of the IDR.
        public var insertedParameterSets: Bool
    }

    public let configuration: Configuration
    public let ssrc: UInt32
    /// The sequence number the next packet gets.
    public private(set) var nextSequenceNumber: UInt16
    /// RTP timestamp of the first access unit (random, RFC 3550 §5.1).
    public let initialTimestamp: UInt32
    /// Capture time of the first access unit: the origin of the 90 kHz clock.
    public private(set) var timeOrigin: Instant?
    /// Parameter sets seen last, re-sent in front of IDRs that lack them.
    public private(set) var lastSPS: [UInt8]?
    public private(set) var lastPPS: [UInt8]?

    public init(configuration: Configuration, ssrc: UInt32, initialSequenceNumber: UInt16,
                initialTimestamp: UInt32) throws {
        // FU-A needs 2 header bytes plus at least one byte of NAL.
        guard configuration.payloadBudget >= 3 else {
            throw CastError(.usage, "an MTU of \(configuration.mtu) leaves \(configuration.payloadBudget) bytes of RTP payload; H.264 needs at least 3")
        }
        self.configuration = configuration
        self.ssrc = ssrc
        self.nextSequenceNumber = initialSequenceNumber
        self.initialTimestamp = initialTimestamp
    }

    /// Random SSRC, sequence and timestamp starts (RFC 3550 §5.1, §8).
    public init(configuration: Configuration, random: inout some RandomNumberGenerator) throws {
        try self.init(configuration: configuration, ssrc: UInt32.random(in: 1...UInt32.max, using: &random),
                      initialSequenceNumber: UInt16.random(in: 0...UInt16.max, using: &random),
                      initialTimestamp: UInt32.random(in: 0...UInt32.max, using: &random))
    }

    /// The 90 kHz RTP timestamp of a capture time (RFC 6184 §5.1), wrapping mod 2^32.
    public mutating func timestamp(for captureTime: Instant) -> UInt32 {
        let origin = timeOrigin ?? captureTime
        timeOrigin = origin
        return Self.timestamp(for: captureTime, origin: origin, initial: initialTimestamp)
    }

    /// The timestamp without remembering an origin (for SR timestamps).
    public static func timestamp(for t: Instant, origin: Instant, initial: UInt32) -> UInt32 {
        RTPClock.videoTimestamp(for: t, origin: origin, initial: initial)
    }

    /// Packetizes one Annex-B access unit. Empty input gives no packets.
    public mutating func packetize(accessUnit: [UInt8], captureTime: Instant) throws -> Output {
        var packets: [RTPPacket] = []
        let out = try packetize(accessUnit: accessUnit, captureTime: captureTime, into: &packets)
        return Output(packets: packets, isKeyframe: out.isKeyframe, insertedParameterSets: out.insertedParameterSets)
    }

    /// Packetizes one Annex-B access unit onto the end of `packets`. The payloads are
    /// slices of `accessUnit` behind inline FU-A headers: nothing is copied, and nothing
    /// allocated but a STAP-A aggregate and parameter sets that changed (issue 19).
    public mutating func packetize(accessUnit: [UInt8], captureTime: Instant, into packets: inout [RTPPacket]) throws
        -> (isKeyframe: Bool, insertedParameterSets: Bool) {
        var scan = AnnexBScanner(accessUnit)
        guard accessUnit.isEmpty || scan.hasStartCode else {
            throw CastError(.malformed, "H.264 access unit has no Annex-B start code (\(accessUnit.count) bytes)")
        }
        var hasSPS = false, hasPPS = false, isKeyframe = false, anySent = false
        while let n = scan.next() {
            guard Self.isSent(n.type) else { continue }
            anySent = true
            switch n.type {
            case H264NALUnit.sps: hasSPS = true; Self.remember(n, in: &lastSPS)
            case H264NALUnit.pps: hasPPS = true; Self.remember(n, in: &lastPPS)
            case H264NALUnit.idrSlice: isKeyframe = true
            default: break
            }
        }
        guard anySent else { return (false, false) }
        let ts = timestamp(for: captureTime)

        // Issue 4 item 5: SPS/PPS in front of every IDR, so a receiver that joins
        // (or recovers after a PLI) can decode it on its own.
        var units = SentUnits(accessUnit: accessUnit,
                              sps: isKeyframe && !hasSPS ? lastSPS : nil, pps: isKeyframe && !hasPPS ? lastPPS : nil)
        let inserted = units.hasInserted

        let first = packets.count
        let budget = configuration.payloadBudget
        while let nal = units.next() {
            // RFC 6184 §5.7.1: aggregate consecutive NAL units into a STAP-A while
            // they fit (1 STAP-A header byte + 2 size bytes per unit). A copy of the
            // unit source reads ahead.
            var size = 1 + 2 + nal.bytes.count
            var aggregated = size <= budget ? 1 : 0
            var ahead = units
            while aggregated > 0, let n = ahead.next(), size + 2 + n.bytes.count <= budget {
                size += 2 + n.bytes.count
                aggregated += 1
            }
            if aggregated >= 2 {
                append(head: RTPPayloadHead(), body: Self.stapA(first: nal, more: aggregated - 1, of: &units, size: size)[...],
                       timestamp: ts, to: &packets)
            } else if nal.bytes.count <= budget {
                append(head: RTPPayloadHead(), body: nal.bytes, timestamp: ts, to: &packets)   // §5.6 single NAL unit packet
            } else {
                fuA(nal, budget: budget, timestamp: ts, to: &packets)
            }
        }
        // The marker ends the access unit (RFC 6184 §5.1).
        if packets.count > first { packets[packets.count - 1].header.marker = true }
        return (isKeyframe, inserted)
    }

    private mutating func append(head: RTPPayloadHead, body: ArraySlice<UInt8>, timestamp: UInt32, to packets: inout [RTPPacket]) {
        let h = RTPHeader(marker: false, payloadType: configuration.payloadType,
                          sequenceNumber: nextSequenceNumber, timestamp: timestamp, ssrc: ssrc)
        nextSequenceNumber &+= 1
        packets.append(RTPPacket(header: h, head: head, body: body))
    }

    /// Keeps a parameter set, allocating only when it differs from the one kept.
    private static func remember(_ n: H264NALUnit, in kept: inout [UInt8]?) {
        if let k = kept, k.elementsEqual(n.bytes) { return }
        kept = Array(n.bytes)
    }

    /// The NAL units an access unit sends, in order: remembered parameter sets put in
    /// front of an IDR that lacks them, then the units of the access unit that are sent.
    struct SentUnits: IteratorProtocol {
        var sps: [UInt8]?
        var pps: [UInt8]?
        var scan: AnnexBScanner

        init(accessUnit: [UInt8], sps: [UInt8]?, pps: [UInt8]?) {
            self.sps = sps
            self.pps = pps
            scan = AnnexBScanner(accessUnit)
        }

        var hasInserted: Bool { sps != nil || pps != nil }

        mutating func next() -> H264NALUnit? {
            if let s = sps { sps = nil; return H264NALUnit(s) }
            if let p = pps { pps = nil; return H264NALUnit(p) }
            while let n = scan.next() { if H264Packetizer.isSent(n.type) { return n } }
            return nil
        }
    }

    /// AUDs and filler carry nothing a WebRTC receiver uses (RFC 6184 §5.1 leaves
    /// framing to RTP: the marker bit ends the access unit). Types 0 and 24…31 are
    /// unspecified in H.264 and would be read as STAP/MTAP/FU payloads by the
    /// receiver (RFC 6184 §5.2, Table 1), so they are never sent as they are.
    static func isSent(_ type: UInt8) -> Bool {
        switch type {
        case 0, 24...31, H264NALUnit.accessUnitDelimiter, H264NALUnit.fillerData: return false
        default: return true
        }
    }

    //  0                   1                   2                   3
    //  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
    // +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
    // |STAP-A NAL HDR |         NALU 1 Size           | NALU 1 HDR    |
    // +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
    // |                         NALU 1 Data  ...      | NALU 2 Size  ...
    // (RFC 6184 §5.7.1, Figure 7)
    /// `first` and the `more` units that follow it in `units` (which moves past them),
    /// as one STAP-A payload of `size` bytes.
    static func stapA(first: H264NALUnit, more: Int, of units: inout SentUnits, size: Int) -> [UInt8] {
        // §5.7.1: F is the OR of all F bits, NRI the maximum of all NRIs.
        var f = first.forbiddenBit, nri = first.nri
        var ahead = units
        for _ in 0..<more {
            guard let n = ahead.next() else { break }
            f |= n.forbiddenBit; nri = max(nri, n.nri)
        }
        var w = ByteWriter(capacity: size)
        w.u8(f | nri | H264NALUnit.stapA)
        w.u16(UInt16(first.bytes.count))
        w.append(first.bytes)
        for _ in 0..<more {
            guard let n = units.next() else { break }
            w.u16(UInt16(n.bytes.count))
            w.append(n.bytes)
        }
        return w.bytes
    }

    // +---------------+---------------+
    // |0|1|2|3|4|5|6|7|0|1|2|3|4|5|6|7|
    // +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
    // |F|NRI|  Type=28|S|E|R|  Type   |
    // +---------------+---------------+
    //   FU indicator     FU header
    // (RFC 6184 §5.8: the NAL header byte itself is not sent; its F and NRI go
    // into the indicator, its type into the FU header.) The two bytes are the
    // packet's inline head; the fragment is a slice of the NAL unit.
    private mutating func fuA(_ nal: H264NALUnit, budget: Int, timestamp: UInt32, to packets: inout [RTPPacket]) {
        let indicator = nal.forbiddenBit | nal.nri | H264NALUnit.fuA
        let body = nal.bytes.dropFirst()
        let chunk = budget - 2
        var start = body.startIndex
        while start < body.endIndex {
            let end = min(start + chunk, body.endIndex)
            var header = nal.type
            if start == body.startIndex { header |= 0x80 }   // S
            if end == body.endIndex { header |= 0x40 }       // E
            var head = RTPPayloadHead()
            head.append(indicator)
            head.append(header)
            append(head: head, body: body[start..<end], timestamp: timestamp, to: &packets)
            start = end
        }
    }
}
