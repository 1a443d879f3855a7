import Testing
import CastCore
import SansIOContract
@testable import CastRTP

@Suite struct VideoSenderTests {
    static let sps: [UInt8] = [0x67, 0x42, 0xc0, 0x1f, 0xda]
    static let pps: [UInt8] = [0x68, 0xce, 0x3c, 0x80]

    func configuration(rtx: Bool = true) -> VideoSender.Configuration {
        VideoSender.Configuration(payloadType: 102, rtxPayloadType: rtx ? 103 : nil, cname: "castd-test",
                                  extensionIDs: .init(absSendTime: 2, transportCC: 3, playoutDelay: 4),
                                  wallclockOffset: .seconds(1_700_000_000),
                                  // No probe padding here (CongestionScenarioTests cover it): exact packet counts.
                                  congestion: .init(probing: false))
    }

    func sender(rtx: Bool = true) throws -> VideoSender {
        var rng = SeededRandom(seed: 42)
        return try VideoSender(configuration: configuration(rtx: rtx), random: &rng)
    }

    func keyframe(size: Int) -> [UInt8] {
        [0, 0, 0, 1] + Self.sps + [0, 0, 0, 1] + Self.pps + [0, 0, 0, 1, 0x65] + Array(repeating: 0x5a, count: size - 1)
    }

    func rtp(_ datagrams: [VideoSender.Datagram]) throws -> [RTPPacket] {
        try datagrams.compactMap { if case .rtp(let b) = $0 { return try RTPPacket.parse(b) } else { return nil } }
    }

    func rtcp(_ datagrams: [VideoSender.Datagram]) throws -> [[RTCPPacket]] {
        try datagrams.compactMap { if case .rtcp(let b) = $0 { return try RTCPCompound.parse(b) } else { return nil } }
    }

    @Test func anAccessUnitLeavesAsStampedRTPFollowedByAnSR() throws {
        var s = try sender()
        s.handle(.accessUnit(keyframe(size: 3000), captureTime: ms(0)), now: ms(0))
        let out = s.datagrams(at: ms(0))
        let packets = try rtp(out)
        // STAP-A(SPS, PPS) + 3 FU-As: budget 1200 − 12 − 16 (extensions) − 16 (SRTP) − 2 (RTX) = 1154.
        #expect(packets.count == 4)
        #expect(s.packetizer.configuration.payloadBudget == 1154)
        #expect(packets.map(\.header.marker) == [false, false, false, true])
        #expect(packets.allSatisfy { $0.header.ssrc == s.ssrc && $0.header.payloadType == 102 })
        for b in out { if case .rtp(let bytes) = b { #expect(bytes.count <= 1200 - 16) } }
        let twcc = try packets.map { try RTPExtensionValue.parseTransportSequence($0.header.extensions!.element(id: 3)!) }
        #expect(twcc == [1, 2, 3, 4])
        #expect(packets[0].header.extensions?.element(id: 2) == RTPExtensionValue.absSendTime(ms(0)))
        #expect(packets[0].header.extensions?.element(id: 4) == [0, 0, 0])

        let reports = try rtcp(out)
        #expect(reports.count == 1)
        guard case .senderReport(let sr) = reports[0][0], case .sourceDescription(let sdes) = reports[0][1] else {
            Issue.record("expected SR + SDES"); return
        }
        #expect(sr.packetCount == 4)
        #expect(sr.octetCount == UInt32(packets.reduce(0) { $0 + $1.payload.count }))
        #expect(sr.rtpTimestamp == packets[0].header.timestamp)
        #expect(sdes.cname(of: s.ssrc) == "castd-test")
        #expect(s.nextDeadline() == ms(100))   // the estimator's periodic processing; the next SR at 1 s
        #expect(s.statistics.framesSent == 1 && s.statistics.keyframesSent == 1 && s.statistics.packetsSent == 4)
    }

    @Test func aNACKedPacketIsResentOverRTXOncePerRTT() throws {
        var s = try sender()
        s.handle(.accessUnit(keyframe(size: 3000), captureTime: ms(0)), now: ms(0))
        let sent = try rtp(s.datagrams(at: ms(0)))
        let lost = sent[2]
        let nack = try RTCPCompound.serialize([.nack(GenericNACK(senderSSRC: 0x9999, mediaSSRC: s.ssrc,
                                                                 lost: [lost.header.sequenceNumber]))])
        #expect(s.events(afterRTCP: nack, now: ms(30)) == [.retransmit(sequenceNumber: lost.header.sequenceNumber)])
        let resent = try rtp(s.datagrams(at: ms(30)))
        #expect(resent.count == 1)
        let r = resent[0]
        #expect(r.header.ssrc == s.rtxSSRC && r.header.payloadType == 103 && r.header.timestamp == lost.header.timestamp)
        #expect(Array(r.payload.prefix(2)) == [UInt8(lost.header.sequenceNumber >> 8), UInt8(lost.header.sequenceNumber & 0xff)])
        #expect(Array(r.payload.dropFirst(2)) == lost.payload)
        #expect(try RTPExtensionValue.parseTransportSequence(r.header.extensions!.element(id: 3)!) == 5)
        // The same NACK again within the (initial, 100 ms) RTT is not served twice.
        #expect(s.events(afterRTCP: nack, now: ms(60)).isEmpty)
        // Nor is a NACK for a packet never sent.
        let unknown = try RTCPCompound.serialize([.nack(GenericNACK(senderSSRC: 0x9999, mediaSSRC: s.ssrc,
                                                                    lost: [lost.header.sequenceNumber &+ 500]))])
        #expect(s.events(afterRTCP: unknown, now: ms(60)).isEmpty)
        #expect(s.statistics.nacksReceived == 3 && s.statistics.nacksIgnored == 2 && s.statistics.retransmissionsSent == 1)
        #expect(s.events(afterRTCP: nack, now: ms(131)) == [.retransmit(sequenceNumber: lost.header.sequenceNumber)])
    }

    @Test func withoutRTXTheSamePacketIsResentAsIs() throws {
        var s = try sender(rtx: false)
        #expect(s.packetizer.configuration.payloadBudget == 1156)
        s.handle(.accessUnit(keyframe(size: 3000), captureTime: ms(0)), now: ms(0))
        let sent = try rtp(s.datagrams(at: ms(0)))
        let nack = try RTCPCompound.serialize([.nack(GenericNACK(senderSSRC: 1, mediaSSRC: s.ssrc,
                                                                 lost: [sent[1].header.sequenceNumber]))])
        _ = s.events(afterRTCP: nack, now: ms(20))
        let resent = try rtp(s.datagrams(at: ms(20)))
        #expect(resent.count == 1)
        #expect(resent[0].header.ssrc == s.ssrc && resent[0].header.sequenceNumber == sent[1].header.sequenceNumber)
        #expect(resent[0].payload == sent[1].payload)
    }

    @Test func pliBecomesAKeyframeRequestAtMostEvery500ms() throws {
        var s = try sender()
        let pli = try RTCPCompound.serialize([.pictureLoss(PictureLossIndication(senderSSRC: 1, mediaSSRC: s.ssrc))])
        #expect(s.events(afterRTCP: pli, now: ms(0)) == [.keyframeRequested(.pictureLoss)])
        #expect(s.events(afterRTCP: pli, now: ms(100)).isEmpty)
        #expect(s.events(afterRTCP: pli, now: ms(600)) == [.keyframeRequested(.pictureLoss)])
        // The IDR the encoder sends answers any request for the next 500 ms.
        s.handle(.accessUnit(keyframe(size: 100), captureTime: ms(1200)), now: ms(1200))
        #expect(s.events(afterRTCP: pli, now: ms(1300)).isEmpty)
        // A PLI about another stream is not ours.
        let other = try RTCPCompound.serialize([.pictureLoss(PictureLossIndication(senderSSRC: 1, mediaSSRC: s.ssrc &+ 1))])
        #expect(s.events(afterRTCP: other, now: ms(5000)).isEmpty)
        #expect(s.statistics.pictureLossReceived == 4 && s.statistics.keyframesRequested == 2)
    }

    @Test func firIsDeduplicatedBySequenceNumber() throws {
        var s = try sender()
        func fir(_ n: UInt8) throws -> [UInt8] {
            try RTCPCompound.serialize([.fullIntraRequest(FullIntraRequest(senderSSRC: 1, entries: [.init(ssrc: s.ssrc, sequenceNumber: n)]))])
        }
        #expect(s.events(afterRTCP: try fir(1), now: ms(0)) == [.keyframeRequested(.fullIntraRequest)])
        #expect(s.events(afterRTCP: try fir(1), now: ms(800)).isEmpty)
        #expect(s.events(afterRTCP: try fir(2), now: ms(800)) == [.keyframeRequested(.fullIntraRequest)])
    }

    @Test func receiverReportsGiveLossJitterAndRTT() throws {
        var s = try sender()
        s.handle(.accessUnit(keyframe(size: 100), captureTime: ms(0)), now: ms(0))
        let srs = try rtcp(s.datagrams(at: ms(0)))
        guard case .senderReport(let sr) = srs[0][0] else { Issue.record("no SR"); return }
        let block = ReportBlock(ssrc: s.ssrc, fractionLost: 128, cumulativeLost: 3, extendedHighestSequence: 1,
                                jitter: 90, lastSenderReport: sr.ntpTime.compact, delaySinceLastSenderReport: 0x0800)
        let rr = try RTCPCompound.serialize([.receiverReport(ReceiverReport(ssrc: 0x9999, reports: [block]))])
        let events = s.events(afterRTCP: rr, now: ms(250))   // 250 ms after the SR
        let expected = ReceiverStatistics(fractionLost: 0.5, cumulativeLost: 3, extendedHighestSequence: 1,
                                          jitter: .milliseconds(1), roundTripTime: .milliseconds(218) + .microseconds(750))
        // 250 ms − 31.25 ms (DLSR 0x800); 50 % loss (> 10 %) cuts the target by a quarter (gcc-02 §6).
        #expect(events == [.receiverReport(expected),
                           .targetRate(bitsPerSecond: 750_000, pacingBitsPerSecond: 1_875_000, usage: .normal)])
        #expect(s.statistics.roundTripTime == .microseconds(218_750))
    }

    @Test func rembAndTransportCCSurfaceAsBandwidthEstimates() throws {
        var s = try sender()
        let remb = try RTCPCompound.serialize([.remb(ReceiverEstimatedMaxBitrate(senderSSRC: 1, bitrate: 6_000_000, ssrcs: [s.ssrc]))])
        #expect(s.events(afterRTCP: remb, now: ms(0)) == [.bandwidthEstimate(BandwidthEstimate(source: .remb, bitsPerSecond: 6_000_000))])
        s.handle(.accessUnit(keyframe(size: 3000), captureTime: ms(0)), now: ms(0))
        _ = s.datagrams(at: ms(0))
        let fb = try RTCPCompound.serialize([.transportCC(TransportCCFeedback(
            senderSSRC: 1, mediaSSRC: s.ssrc, baseSequenceNumber: 1, referenceTime: 0, feedbackPacketCount: 0,
            receiveDeltas: [0, 4, nil, 4]))])
        guard case .bandwidthEstimate(let e)? = s.events(afterRTCP: fb, now: ms(50)).first else { Issue.record("no estimate"); return }
        #expect(e.source == .transportCC)
        #expect(e.lossFraction == 0.25)
        #expect(e.bitsPerSecond > 0)
        #expect(s.statistics.bandwidth == e)
    }

    @Test func malformedRTCPIsCountedAndDropped() throws {
        var s = try sender()
        #expect(s.events(afterRTCP: [0x80, 0xc9, 0x00], now: ms(0)).isEmpty)
        #expect(s.events(afterRTCP: [], now: ms(0)).isEmpty)
        #expect(s.statistics.malformedRTCP == 2)
    }

    @Test func aLargeKeyframeIsPacedNotBurst() throws {
        // A 32 Mbit/s target paces at 80 Mbit/s (the pacer's old fixed rate).
        var c = configuration()
        c.congestion = .init(startBitrate: 32_000_000, maximumBitrate: 32_000_000, probing: false)
        var rng = SeededRandom(seed: 42)
        var s = try VideoSender(configuration: c, random: &rng)
        s.handle(.accessUnit(keyframe(size: 150_000), captureTime: ms(0)), now: ms(0))
        var sent = try rtp(s.datagrams(at: ms(0))).count
        #expect(sent > 50 && sent < 60)   // libwebrtc's cap: 63,000 bytes at once (30 ms would be 300 kB)
        var now = ms(0)
        while let d = s.nextDeadline(), d < ms(1000), s.queuedBytes > 0 {
            now = d
            sent += try rtp(s.datagrams(at: now)).count
        }
        #expect(sent == 132)   // 1 STAP-A + ceil(149 999 / 1152) FU-As
        #expect(now > ms(8) && now < ms(11), "\(now)")   // the other ~92 kB at 10 MB/s
    }

    @Test func ssrcsAnnouncedInTheOfferCanBeGiven() throws {
        var rng = SeededRandom(seed: 5)
        var s = try VideoSender(configuration: configuration(), ssrc: 0x1111_2222, rtxSSRC: 0x3333_4444, random: &rng)
        #expect(s.ssrc == 0x1111_2222 && s.rtxSSRC == 0x3333_4444)
        s.handle(.accessUnit(keyframe(size: 100), captureTime: ms(0)), now: ms(0))
        #expect(try rtp(s.datagrams(at: ms(0))).allSatisfy { $0.header.ssrc == 0x1111_2222 })
        var rng2 = SeededRandom(seed: 5)
        #expect(errorCode { _ = try VideoSender(configuration: configuration(), ssrc: 7, rtxSSRC: 7, random: &rng2) } == .usage)
    }

    @Test func thePacingRateFollowsTheTargetUnderTheOwnersCeiling() throws {
        var s = try sender()
        // Start: 1 Mbit/s target, paced at 2.5 ×.
        #expect(s.events().isEmpty && s.targetBitsPerSecond == 1_000_000)
        s.handle(.maximumBitrate(400_000), now: ms(0))   // 720p-like ceiling: the pacer slows to 1 Mbit/s
        #expect(s.events() == [.targetRate(bitsPerSecond: 400_000, pacingBitsPerSecond: 1_000_000, usage: .normal)])
        #expect(s.targetBitsPerSecond == 400_000)
        s.handle(.accessUnit(keyframe(size: 30_000), captureTime: ms(0)), now: ms(0))
        #expect(s.queuedDuration > .milliseconds(240) && s.queuedDuration < .milliseconds(250))
        var now = ms(0)
        _ = s.datagrams(at: now)
        while let d = s.nextDeadline(), d < ms(1000), s.queuedBytes > 0 { now = d; _ = s.datagrams(at: now) }
        // 30 kB + headers at 125 bytes/ms, less the first burst (30 ms at the start's 2.5 Mbit/s: 9,375 bytes).
        #expect(now > ms(160) && now < ms(175), "\(now)")
        #expect(s.queuedBytes == 0 && s.queuedDuration == .zero)
    }

    @Test func goodbyeNamesBothStreams() throws {
        let s = try sender()
        guard case .rtcp(let bytes)? = s.goodbye(reason: "done") else { Issue.record("no BYE"); return }
        let packets = try RTCPCompound.parse(bytes)
        #expect(packets.last == .goodbye(Goodbye(sources: [s.ssrc, s.rtxSSRC!], reason: "done")))
    }
}

/// The sender keeps the one sans-IO contract (`SansIO` in CastCore).
@Suite struct VideoSenderContractTests {
    let t = VideoSenderTests()

    @Test func outputsComeInDecisionOrderAndDrainingLeavesOnlyTheDeadline() throws {
        var s = try t.sender()
        s.handle(.accessUnit(t.keyframe(size: 3000), captureTime: ms(0)), now: ms(0))
        #expect(s.poll() == nil)   // queued in the pacer: nothing leaves before handleTimeout
        s.handleTimeout(now: ms(0))
        var kinds: [String] = []
        while let o = s.poll() {
            switch o {
            case .transmit(.rtp): kinds.append("rtp")
            case .transmit(.rtcp): kinds.append("rtcp")
            case .event: kinds.append("event")
            }
        }
        // Decided in this order: the paced RTP packets, then the SR + SDES that counts them.
        #expect(kinds == ["rtp", "rtp", "rtp", "rtp", "rtcp"])
        #expect(s.poll() == nil)
        #expect(s.nextDeadline() == ms(100))   // only the deadline is left
    }

    @Test func anEventIsDecidedInItsPlaceAmongTheDatagrams() throws {
        var s = try t.sender()
        let pli = try RTCPCompound.serialize([.pictureLoss(PictureLossIndication(senderSSRC: 9, mediaSSRC: s.ssrc))])
        s.handle(.rtcp(pli), now: ms(0))
        s.handle(.accessUnit(t.keyframe(size: 500), captureTime: ms(0)), now: ms(0))
        s.handleTimeout(now: ms(0))
        // The PLI's request was decided before the picture's packets went out.
        #expect(s.poll() == .event(.keyframeRequested(.pictureLoss)))
        guard case .transmit(.rtp)? = s.poll() else { Issue.record("no RTP after the event"); return }
    }

    /// What a datagram is, without the send time stamped in it: an RTP packet by its SSRC and
    /// sequence number, an RTCP compound as such (its SR carries the clock), an event as it is.
    /// The pacer's deadline is the instant of the last input, so the check's early call comes
    /// before it and stamps the packets it sends with its own instant.
    static func identity(_ o: VideoSender.Output) -> String {
        switch o {
        case .transmit(.rtp(let b)):
            guard let h = try? RTPPacket.parse(b).header else { return "rtp?" }
            return "rtp \(h.ssrc) \(h.sequenceNumber)"
        case .transmit(.rtcp): return "rtcp"
        case .event(let e): return "\(e)"
        }
    }

    /// A keyframe paced out at the timeout, and a picture-loss request among the inputs.
    @Test func theSharedContractHolds() throws {
        let pli = try RTCPCompound.serialize([.pictureLoss(PictureLossIndication(senderSSRC: 9, mediaSSRC: t.sender().ssrc))])
        let v = SansIOContract.violations({ try! t.sender() }, inputs: [
            (.rtcp(pli), ms(0)),
            (.accessUnit(t.keyframe(size: 3000), captureTime: ms(0)), ms(0)),
        ], same: { Self.identity($0) == Self.identity($1) })
        #expect(v.isEmpty, "\(v)")
    }
}

/// Datagram buffers given back after sending (issue 19's pool).
@Suite struct VideoSenderBufferPoolTests {
    static func bytes(_ d: VideoSender.Datagram) -> [UInt8] {
        switch d { case .rtp(let b), .rtcp(let b): return b }
    }

    static func address(_ b: [UInt8]) -> UnsafeRawPointer? { b.withUnsafeBytes { $0.baseAddress } }

    static func accessUnit(_ i: Int, _ base: VideoSenderTests) -> [UInt8] {
        i % 6 == 0 ? base.keyframe(size: 6000) : [0, 0, 0, 1, 0x41] + Array(repeating: UInt8(i), count: 2500)
    }

    /// Twelve frames (keyframes and P-frames, an SR among them) from two senders alike, one
    /// of which gets every datagram back as the driver gives it: the same bytes on the wire,
    /// and after the first frame every datagram of the recycling one is built in the very
    /// storage the pool gives out (last given back, first taken). The buffer is still alive
    /// in the pool when it is taken, so a copy could not land at its address by chance.
    @Test func recycledBuffersCarryLaterDatagramsWithTheSameBytes() throws {
        let base = VideoSenderTests()
        var plain = try base.sender(), pooled = try base.sender()
        var free: [UnsafeRawPointer?] = []   // what the pool holds, in its order
        var madeAfterFirstFrame = 0, checked = 0
        for i in 0..<12 {
            let t = ms(Int64(i) * 33)
            plain.handle(.accessUnit(Self.accessUnit(i, base), captureTime: t), now: t)
            pooled.handle(.accessUnit(Self.accessUnit(i, base), captureTime: t), now: t)
            let a = plain.datagrams(at: t).map(Self.bytes)
            var b = pooled.datagrams(at: t).map(Self.bytes)
            #expect(a == b)
            #expect(!b.isEmpty)
            if i > 0 {
                for d in b {
                    #expect(Self.address(d) == free.popLast(), "datagram \(checked) of frame \(i) not in the pooled storage")
                    checked += 1
                }
            }
            // Given back one by one, moved out of the list (as the driver's `sendto` lets go).
            while let bytes = b.popLast() {
                free.append(Self.address(bytes))
                pooled.recycle(bytes)
            }
            if i == 0 { madeAfterFirstFrame = pooled.bufferCounts.made }
        }
        #expect(pooled.bufferCounts.made == madeAfterFirstFrame)
        #expect(pooled.bufferCounts.reused == checked && checked > 30)
        #expect(plain.bufferCounts.reused == 0)
    }

    /// Bytes given back while something else still holds them (a socket that queued them)
    /// are never written through: the next packets get storage of their own.
    @Test func aBufferStillHeldElsewhereIsNotWrittenThrough() throws {
        let base = VideoSenderTests()
        var s = try base.sender()
        s.handle(.accessUnit(base.keyframe(size: 6000), captureTime: ms(0)), now: ms(0))
        var held = s.datagrams(at: ms(0)).map(Self.bytes)
        let copies = held.map { $0.map { $0 } }   // what they held, in storage of their own
        for b in held { s.recycle(b) }   // given back, but `held` keeps every one
        s.handle(.accessUnit([0, 0, 0, 1, 0x41] + Array(repeating: 0x77, count: 6000), captureTime: ms(33)), now: ms(33))
        let next = s.datagrams(at: ms(33)).map(Self.bytes)
        #expect(next.count >= 5 && s.bufferCounts.reused == next.count)
        #expect(held == copies)
        let heldStorage = Set(held.compactMap(Self.address))
        #expect(next.allSatisfy { !heldStorage.contains(Self.address($0)!) })
        held.removeAll()
    }

    /// The pool keeps at most its bound, and no buffer too small for a packet.
    @Test func thePoolIsBounded() throws {
        var s = try VideoSenderTests().sender()
        #expect(!s.wantsBuffer(capacity: 100))
        let size = s.configuration.mtu + s.configuration.trailerCapacity
        for _ in 0..<64 { s.recycle([UInt8](repeating: 0, count: size)) }
        #expect(!s.wantsBuffer(capacity: size))
    }
}
