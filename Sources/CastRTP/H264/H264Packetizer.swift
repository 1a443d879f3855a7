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
        var nals = try H264NALUnit.splitAnnexB(accessUnit).filter { Self.isSent($0.type) }
        guard !nals.isEmpty else { return Output(packets: [], isKeyframe: false, insertedParameterSets: false) }
        let ts = timestamp(for: captureTime)

        var hasSPS = false, hasPPS = false, isKeyframe = false
        for n in nals {
            switch n.type {
            case H264NALUnit.sps: hasSPS = true; lastSPS = Array(n.bytes)
            case H264NALUnit.pps: hasPPS = true; lastPPS = Array(n.bytes)
            case H264NALUnit.idrSlice: isKeyframe = true
            default: break
            }
        }
        // Issue 4 item 5: SPS/PPS in front of every IDR, so a receiver that joins
        // (or recovers after a PLI) can decode it on its own.
        var inserted = false
        if isKeyframe {
            var front: [H264NALUnit] = []
            if !hasSPS, let sps = lastSPS { front.append(H264NALUnit(sps)) }
            if !hasPPS, let pps = lastPPS { front.append(H264NALUnit(pps)) }
            if !front.isEmpty { nals.insert(contentsOf: front, at: 0); inserted = true }
        }

        var payloads: [[UInt8]] = []
        let budget = configuration.payloadBudget
        var i = 0
        while i < nals.count {
            // RFC 6184 §5.7.1: aggregate consecutive NAL units into a STAP-A while
            // they fit (1 STAP-A header byte + 2 size bytes per unit).
            var size = 1
            var j = i
            while j < nals.count, size + 2 + nals[j].bytes.count <= budget {
                size += 2 + nals[j].bytes.count
                j += 1
            }
            if j - i >= 2 {
                payloads.append(Self.stapA(nals[i..<j]))
                i = j
            } else if nals[i].bytes.count <= budget {
                payloads.append(Array(nals[i].bytes))   // §5.6 single NAL unit packet
                i += 1
            } else {
                payloads.append(contentsOf: Self.fuA(nals[i], budget: budget))
                i += 1
            }
        }

        var packets: [RTPPacket] = []
        packets.reserveCapacity(payloads.count)
        for (k, p) in payloads.enumerated() {
            let h = RTPHeader(marker: k == payloads.count - 1, payloadType: configuration.payloadType,
                              sequenceNumber: nextSequenceNumber, timestamp: ts, ssrc: ssrc)
            nextSequenceNumber &+= 1
            packets.append(RTPPacket(header: h, payload: p))
        }
        return Output(packets: packets, isKeyframe: isKeyframe, insertedParameterSets: inserted)
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
    static func stapA(_ nals: ArraySlice<H264NALUnit>) -> [UInt8] {
        // §5.7.1: F is the OR of all F bits, NRI the maximum of all NRIs.
        var f: UInt8 = 0, nri: UInt8 = 0
        for n in nals { f |= n.forbiddenBit; nri = max(nri, n.nri) }
        var w = ByteWriter(capacity: 1 + nals.reduce(0) { $0 + 2 + $1.bytes.count })
        w.u8(f | nri | H264NALUnit.stapA)
        for n in nals {
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
    // into the indicator, its type into the FU header.)
    static func fuA(_ nal: H264NALUnit, budget: Int) -> [[UInt8]] {
        let indicator = nal.forbiddenBit | nal.nri | H264NALUnit.fuA
        let body = nal.bytes.dropFirst()
        let chunk = budget - 2
        var out: [[UInt8]] = []
        var start = body.startIndex
        while start < body.endIndex {
            let end = min(start + chunk, body.endIndex)
            var header = nal.type
            if start == body.startIndex { header |= 0x80 }   // S
            if end == body.endIndex { header |= 0x40 }       // E
            var p: [UInt8] = [indicator, header]
            p.reserveCapacity(2 + end - start)
            p.append(contentsOf: body[start..<end])
            out.append(p)
            start = end
        }
        return out
    }
}
