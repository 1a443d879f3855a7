import Foundation
import Testing
import CastCore
import SansIOContract
@testable import CastRTP

@Suite struct OpusPacketizerTests {
    @Test func packetsCarryOneOpusPacketWith48kHzTimestampsAndAMarkerOnTheFirstOnly() throws {
        var p = try OpusPacketizer(payloadType: 111, ssrc: 0x0102_0304, initialSequenceNumber: 0xfffe,
                                   initialTimestamp: 0xffff_fe00)
        let a = try p.packetize([0xfc, 0xaa, 0xbb], samples: 960).serialize()
        let b = try p.packetize([0xfc, 0xcc], samples: 960).serialize()
        let c = try p.packetize([0xfc], samples: 480).serialize()
        // V=2, M=1, PT=111 (0xef); seq fffe; ts fffffe00; SSRC; the Opus packet as the payload (RFC 7587 §4.2).
        #expect(hex(a) == "80effffefffffe0001020304fcaabb")
        // M=0; seq and timestamp wrap mod 2^16 and 2^32: fffffe00 + 960 = 0x000001c0.
        #expect(hex(b) == "806fffff000001c001020304fccc")
        #expect(hex(c) == "806f00000000058001020304fc")   // 0x1c0 + 960 = 0x580
        #expect(p.nextTimestamp == 0x0000_0580 + 480)
    }

    @Test func skippedSamplesMoveTheTimestampAndMarkANewTalkspurt() throws {
        var p = try OpusPacketizer(payloadType: 111, ssrc: 7, initialSequenceNumber: 10, initialTimestamp: 1000)
        _ = try p.packetize([0xfc], samples: 960)
        let gap = try p.packetize([0xfc], samples: 960, skippedBefore: 1920)
        #expect(gap.header.timestamp == 1000 + 960 + 1920)
        #expect(gap.header.marker)
        #expect(gap.header.sequenceNumber == 11)   // no packet is missing: only samples are
        let next = try p.packetize([0xfc], samples: 960)
        #expect(!next.header.marker)
        #expect(next.header.timestamp == 1000 + 960 + 1920 + 960)
    }

    @Test func impossiblePacketsAreRefusedWithoutSendingAnything() throws {
        var p = try OpusPacketizer(payloadType: 111, ssrc: 7, initialSequenceNumber: 10, initialTimestamp: 1000)
        #expect(errorCode { _ = try p.packetize([], samples: 960) } == .usage)
        #expect(errorCode { _ = try p.packetize([0xfc], samples: 0) } == .usage)
        #expect(errorCode { _ = try p.packetize([0xfc], samples: 5761) } == .usage)
        #expect(errorCode { _ = try p.packetize([0xfc], samples: 960, skippedBefore: -1) } == .usage)
        #expect(p.nextSequenceNumber == 10 && p.nextTimestamp == 1000)
        #expect(errorCode { _ = try OpusPacketizer(payloadType: 128, ssrc: 7, initialSequenceNumber: 0, initialTimestamp: 0) } == .usage)
    }
}

@Suite struct AudioSenderTests {
    static let offset = Duration.seconds(1_700_000_000)

    func sender(ids: AudioSender.ExtensionIDs = .init(transportCC: 3, audioLevel: 1)) throws -> AudioSender {
        try AudioSender(configuration: .init(payloadType: 111, cname: "castd-test", extensionIDs: ids,
                                             wallclockOffset: Self.offset),
                        ssrc: 0xa0b0_c0d0, initialSequenceNumber: 0x0100, initialTimestamp: 0x1000_0000)
    }

    /// Drives the sender's timeout at `now` and drains it: every output, then the deadline left.
    func drain(_ s: inout AudioSender, now: Instant) -> (outputs: [AudioSender.Output], deadline: Instant?) {
        s.handleTimeout(now: now)
        var out: [AudioSender.Output] = []
        while let o = s.poll() { out.append(o) }
        return (out, s.nextDeadline())
    }

    @Test func aFrameLeavesAtOnceWithTransportSequenceAndAudioLevel() throws {
        var s = try sender()
        let frame = EncodedAudioFrame(opus: [0xfc, 0x11, 0x22], samples: 960, captureTime: ms(1000), level: 30)
        let size = s.packetSize(of: frame)
        s.handle(.frame(frame, transportSequenceNumber: 0x0a0b), now: ms(1000))
        let (out, deadline) = drain(&s, now: ms(1000))
        guard case .transmit(.rtp(let bytes)) = out.first else {
            Issue.record("no RTP packet first: \(out)")
            return
        }
        // X=1, M=1, PT 111; the RFC 8285 one-byte block: transport-cc (id 3, 2 bytes) then
        // the RFC 6464 level (id 1, 1 byte: V=1, 30 −dBov), padded to a word (5 bytes + 3).
        #expect(hex(bytes) == "90ef010010000000a0b0c0d0" + "bede0002" + "310a0b" + "109e" + "000000" + "fc1122")
        #expect(size == bytes.count + 16)   // the SRTP tag is counted too
        // The first packet makes a sender report due at once; the next one a second later.
        #expect(out.count == 2)
        guard case .transmit(.rtcp(let sr)) = out.last else {
            Issue.record("no SR after the first packet")
            return
        }
        let compound = try RTCPCompound.parse(sr)
        guard case .senderReport(let report) = compound.first else {
            Issue.record("not an SR: \(compound)")
            return
        }
        #expect(report.ssrc == 0xa0b0_c0d0 && report.packetCount == 1 && report.octetCount == 3)
        #expect(compound.contains(.sourceDescription(SourceDescription(ssrc: 0xa0b0_c0d0, cname: "castd-test"))))
        #expect(deadline == ms(2000))
        #expect(s.nextDeadline() == ms(2000))
        #expect(s.statistics.framesSent == 1 && s.statistics.senderReportsSent == 1)
    }

    @Test func withoutNegotiatedExtensionsThePacketIsPlain() throws {
        var s = try sender(ids: .init())
        s.handle(.frame(EncodedAudioFrame(opus: [0xfc], samples: 960, captureTime: ms(0), level: 50),
                            transportSequenceNumber: nil), now: ms(0))
        guard case .transmit(.rtp(let bytes))? = s.poll() else {
            Issue.record("no RTP packet")
            return
        }
        #expect(hex(bytes) == "80ef010010000000a0b0c0d0fc")
    }

    @Test func aMissingTransportSequenceIsAUsageErrorWhenTransportCCIsNegotiated() throws {
        var s = try sender()
        let frame = EncodedAudioFrame(opus: [0xfc], samples: 960, captureTime: ms(0))
        s.handle(.frame(frame, transportSequenceNumber: nil), now: ms(0))
        s.handle(.frame(EncodedAudioFrame(opus: [], samples: 960, captureTime: ms(0)), transportSequenceNumber: 1), now: ms(0))
        // Each refusal is an event in the order it was decided, not a throw; nothing was sent.
        let (out, deadline) = drain(&s, now: ms(0))
        guard out.count == 2, case .event(.frameRejected(let a)) = out[0], case .event(.frameRejected(let b)) = out[1] else {
            Issue.record("not two refusals: \(out)")
            return
        }
        #expect(a.code == .usage && a.message.contains("transport-wide sequence number"))
        #expect(b.code == .usage && b.message.contains("at least one byte"))
        #expect(deadline == nil && s.statistics.framesSent == 0)   // no SR is due
    }

    /// Lip sync: the audio SR and the video SR, sharing the wallclock offset,
    /// map the RTP timestamps of two frames captured at the same instant to
    /// the same NTP time (RFC 3550 §6.4.1), though clocks (48 vs 90 kHz),
    /// timestamp origins and report instants all differ.
    @Test func audioAndVideoSenderReportsShareOneNTPClock() throws {
        var video = try { () throws -> VideoSender in
            var rng = SeededRandom(seed: 7)
            return try VideoSender(configuration: .init(payloadType: 102, cname: "castd-test", wallclockOffset: Self.offset),
                                   random: &rng)
        }()
        var audio = try sender()
        let capture = ms(5000)
        let au: [UInt8] = [0, 0, 0, 1, 0x65, 0x88, 0x84, 0x00]
        video.handle(.accessUnit(au, captureTime: capture), now: ms(5004))
        let vOut = video.datagrams(at: ms(5004))
        audio.handle(.frame(EncodedAudioFrame(opus: [0xfc, 1, 2], samples: 960, captureTime: capture),
                                transportSequenceNumber: 9), now: ms(5001))
        let aOut = drain(&audio, now: ms(5021)).outputs

        func captureNTP(_ datagrams: [VideoSender.Datagram], rate: Double) throws -> Double {
            var rtpTS: UInt32?, sr: SenderReport?
            for d in datagrams {
                switch d {
                case .rtp(let b): rtpTS = try RTPPacket.parse(b).header.timestamp
                case .rtcp(let b):
                    if case .senderReport(let r) = try RTCPCompound.parse(b).first { sr = r }
                }
            }
            let ts = try #require(rtpTS), report = try #require(sr)
            let ntp = Double(report.ntpTime.rawValue >> 32) + Double(report.ntpTime.rawValue & 0xffff_ffff) / 4_294_967_296
            let ticksSince = Double(Int32(bitPattern: report.rtpTimestamp &- ts))
            return ntp - ticksSince / rate
        }
        let aDatagrams: [VideoSender.Datagram] = aOut.compactMap { if case .transmit(let d) = $0 { d } else { nil } }
        let v = try captureNTP(vOut, rate: 90_000), a = try captureNTP(aDatagrams, rate: 48_000)
        let expected = Double(NTPTime(capture, wallclockOffset: Self.offset).rawValue >> 32) + 0.0   // 5.000 s exactly: no fraction
        #expect(abs(v - expected) < 0.000_1, "video capture at NTP \(v), expected \(expected)")
        #expect(abs(a - v) < 0.000_1, "audio and video differ by \((a - v) * 1000) ms")
    }

    @Test func receiverReportsAboutOurSSRCBecomeEventsOthersAndGarbageDoNot() throws {
        var s = try sender()
        s.handle(.frame(EncodedAudioFrame(opus: [0xfc], samples: 960, captureTime: ms(0)), transportSequenceNumber: 1),
                     now: ms(0))
        _ = drain(&s, now: ms(0))
        let ours = ReportBlock(ssrc: 0xa0b0_c0d0, fractionLost: 64, cumulativeLost: 3, extendedHighestSequence: 0x0100,
                               jitter: 480, lastSenderReport: 0, delaySinceLastSenderReport: 0)
        var theirs = ours
        theirs.ssrc = 0x1234
        let rr = try RTCPCompound.serialize([.receiverReport(ReceiverReport(ssrc: 5, reports: [theirs, ours]))])
        s.handle(.rtcp(rr), now: ms(100))
        let (out, _) = drain(&s, now: ms(100))
        #expect(out.count == 1)
        guard case .event(.receiverReport(let stats)) = out.first else {
            Issue.record("no receiver report event: \(out)")
            return
        }
        #expect(stats.fractionLost == 0.25)
        #expect(stats.jitter == .milliseconds(10))   // 480 ticks of the 48 kHz clock
        s.handle(.rtcp([0x80, 0xc9, 0x00]), now: ms(200))
        #expect(s.statistics.malformedRTCP == 1)
        #expect(drain(&s, now: ms(200)).outputs.isEmpty)
    }

    @Test func goodbyeNamesTheAudioSSRC() throws {
        let s = try sender()
        guard case .rtcp(let bytes) = try #require(s.goodbye(reason: "bye")) else {
            Issue.record("not RTCP")
            return
        }
        #expect(try RTCPCompound.parse(bytes).contains(.goodbye(Goodbye(sources: [0xa0b0_c0d0], reason: "bye"))))
    }
}

/// Audio datagrams built in buffers given back after sending (issue 19).
@Suite struct AudioSenderBufferPoolTests {
    /// Two senders alike, one of which gets every datagram back: the same bytes (packets
    /// and reports), and after the first turn no buffer is made for any datagram.
    @Test func recycledBuffersCarryLaterPacketsWithTheSameBytes() throws {
        let base = AudioSenderTests()
        var plain = try base.sender(), pooled = try base.sender()
        var made = 0
        var free: [UnsafeRawPointer?] = []   // what the pool holds, in its order
        for i in 0..<120 {
            let now = ms(Int64(i) * 20)
            let frame = EncodedAudioFrame(opus: [0xfc] + Array(repeating: UInt8(i), count: 60 + i), samples: 960,
                                          captureTime: now, level: UInt8(i % 128))
            plain.handle(.frame(frame, transportSequenceNumber: UInt16(i)), now: now)
            pooled.handle(.frame(frame, transportSequenceNumber: UInt16(i)), now: now)
            let a = base.drain(&plain, now: now).outputs, b = base.drain(&pooled, now: now).outputs
            #expect(a == b && !a.isEmpty)
            let sent = b.compactMap { o -> [UInt8]? in
                switch o { case .transmit(.rtp(let bytes)), .transmit(.rtcp(let bytes)): return bytes; default: return nil }
            }
            // Each built in the storage the pool gave out (last given back, first taken; still
            // alive there when taken, so a copy could not land at its address by chance).
            if i > 0 { for bytes in sent { #expect(bytes.withUnsafeBytes { $0.baseAddress } == free.popLast()) } }
            for bytes in sent {
                free.append(bytes.withUnsafeBytes { $0.baseAddress })
                pooled.recycle(bytes)
            }
            if i == 0 { made = pooled.bufferCounts.made }
        }
        // SRs at 0, 1 and 2 s; the first turn made the packet's and the SR's buffers, and
        // the 119 packets and 2 SRs after it were built in them.
        #expect(pooled.statistics.senderReportsSent == 3 && made == 2)
        #expect(pooled.bufferCounts.made == made && pooled.bufferCounts.reused == 119 + 2)
    }
}

/// The sender keeps the one sans-IO contract (`SansIO` in CastCore): the shared check, then
/// what it does not look at (which outputs, and the report's deadlines).
@Suite struct AudioSenderContractTests {
    static let frames: [(AudioSender.Input, Instant)] = [
        (.frame(EncodedAudioFrame(opus: [0xfc, 1], samples: 960, captureTime: ms(0)), transportSequenceNumber: 1), ms(0)),
        (.frame(EncodedAudioFrame(opus: [], samples: 960, captureTime: ms(20)), transportSequenceNumber: 2), ms(20)),
        (.frame(EncodedAudioFrame(opus: [0xfc, 2], samples: 960, captureTime: ms(40)), transportSequenceNumber: 3), ms(40)),
    ]

    @Test func theSharedContractHolds() {
        let v = SansIOContract.violations({ try! AudioSenderTests().sender() }, inputs: Self.frames)
        #expect(v.isEmpty, "\(v)")
    }

    @Test func packetsAndRefusalsInDecisionOrderThenTheReportDeadline() throws {
        var s = try AudioSenderTests().sender()
        #expect(s.poll() == nil && s.nextDeadline() == nil)   // nothing sent: no report is due
        for (input, now) in Self.frames { s.handle(input, now: now) }
        // The first packet, the refusal, the second packet: in the order they were decided.
        guard case .transmit(.rtp(let first))? = s.poll(), case .event(.frameRejected)? = s.poll(),
              case .transmit(.rtp(let second))? = s.poll() else { Issue.record("not in decision order"); return }
        #expect(try RTPPacket.parse(second).header.sequenceNumber == RTPPacket.parse(first).header.sequenceNumber &+ 1)
        #expect(s.poll() == nil)
        // The first packet made a sender report due at once: a deadline, not an output.
        #expect(s.nextDeadline() == ms(0))
        s.handleTimeout(now: ms(40))
        guard case .transmit(.rtcp(let sr))? = s.poll() else { Issue.record("no SR at the deadline"); return }
        #expect(try RTCPCompound.parse(sr).contains { if case .senderReport = $0 { true } else { false } })
        #expect(s.poll() == nil)
        let due = try #require(s.nextDeadline())
        #expect(due == ms(1000))
        s.handleTimeout(now: due)
        guard case .transmit(.rtcp)? = s.poll() else { Issue.record("no SR when due"); return }
        #expect(s.nextDeadline() == due + .seconds(1) && s.statistics.senderReportsSent == 2)
    }
}

@Suite struct AudioLevelTests {
    func level(_ samples: [Float]) -> UInt8 {
        samples.withUnsafeBufferPointer { RTPExtensionValue.minusDBov(of: $0) }
    }

    @Test func levelsFollowRFC6464() {
        #expect(level([Float](repeating: 0, count: 960)) == 127)
        #expect(level([]) == 127)
        #expect(level([1, -1, 1, -1]) == 0)                       // full scale
        #expect(level([2, -3]) == 0)                              // clipped, not negative
        #expect(level([0.5, -0.5]) == 6)                          // −6.02 dBov
        #expect(level((0..<960).map { Float(0.5 * sin(Double($0) * 0.1309)) }) == 9)   // sine: −9.03 dBov
        #expect(level([Float.nan, .infinity, 0.5, -0.5]) == 6)    // non-finite samples are ignored
        #expect(level([1e-9, -1e-9]) == 127)                     // below −127 dBov
        #expect(RTPExtensionValue.audioLevel(minusDBov: 30, voiceActivity: true) == [0x9e])
        #expect(RTPExtensionValue.audioLevel(minusDBov: 200, voiceActivity: false) == [0x7f])
    }
}
