import Testing
import CastCore
@testable import CastRTP

@Suite struct RTCPPacketTests {
    func roundTrip(_ p: RTCPPacket) throws -> String {
        let bytes = try RTCPCompound.serialize([p])
        #expect(try RTCPCompound.parse(bytes) == [p])
        return hex(bytes)
    }

    @Test func senderReportWithoutBlocks() throws {
        let sr = SenderReport(ssrc: 0x902f_9e2e, ntpTime: NTPTime(rawValue: 0xda8b_d1fc_dddd_a05a),
                              rtpTimestamp: 0xaaf4_edd5, packetCount: 1, octetCount: 2)
        #expect(try roundTrip(.senderReport(sr)) == "80c80006902f9e2eda8bd1fcdddda05aaaf4edd50000000100000002")
    }

    @Test func senderReportWithAReportBlock() throws {
        let block = ReportBlock(ssrc: 0xbc5e_9a40, fractionLost: 0x10, cumulativeLost: 0x20, extendedHighestSequence: 0x46e1,
                                jitter: 0x0111, lastSenderReport: 0x9f36_432, delaySinceLastSenderReport: 0x0001_8000)
        let sr = SenderReport(ssrc: 1, ntpTime: NTPTime(rawValue: 2), rtpTimestamp: 3, packetCount: 4, octetCount: 5,
                              reports: [block])
        #expect(try roundTrip(.senderReport(sr)) ==
            "81c8000c" + "00000001" + "0000000000000002" + "00000003" + "00000004" + "00000005"
            + "bc5e9a40" + "10000020" + "000046e1" + "00000111" + "09f36432" + "00018000")
    }

    @Test func receiverReportCarriesASignedCumulativeLoss() throws {
        let block = ReportBlock(ssrc: 0x0203_0405, fractionLost: 0, cumulativeLost: -1, extendedHighestSequence: 0x0001_0002,
                                jitter: 0, lastSenderReport: 0, delaySinceLastSenderReport: 0)
        let rr = ReceiverReport(ssrc: 0x0000_0001, reports: [block])
        #expect(try roundTrip(.receiverReport(rr)) ==
            "81c90007" + "00000001" + "02030405" + "00ffffff" + "00010002" + "00000000" + "00000000" + "00000000")
        // Beyond 24 bits, the count saturates instead of wrapping.
        var big = block
        big.cumulativeLost = 20_000_000
        let bytes = try RTCPCompound.serialize([.receiverReport(ReceiverReport(ssrc: 1, reports: [big]))])
        #expect(hex(Array(bytes[12..<16])) == "007fffff")
    }

    @Test func emptyReceiverReport() throws {
        #expect(try roundTrip(.receiverReport(ReceiverReport(ssrc: 0xdeadbeef))) == "80c90001deadbeef")
    }

    @Test func sdesCNAMEEndsWithANullAndPadsToAWord() throws {
        // "ab" fills the word exactly, so a whole word of nulls follows.
        #expect(try roundTrip(.sourceDescription(SourceDescription(ssrc: 0x0102_0304, cname: "ab")))
                == "81ca0003" + "01020304" + "01026162" + "00000000")
        #expect(try roundTrip(.sourceDescription(SourceDescription(ssrc: 0x0102_0304, cname: "abc")))
                == "81ca0003" + "01020304" + "01036162" + "63000000")
        let parsed = try RTCPCompound.parse(hex("81ca0003" + "01020304" + "01036162" + "63000000"))
        guard case .sourceDescription(let sdes) = parsed[0] else { Issue.record("not SDES"); return }
        #expect(sdes.cname(of: 0x0102_0304) == "abc")
    }

    @Test func byeWithAndWithoutAReason() throws {
        #expect(try roundTrip(.goodbye(Goodbye(sources: [0x0102_0304], reason: "bye"))) == "81cb0002" + "01020304" + "03627965")
        #expect(try roundTrip(.goodbye(Goodbye(sources: [0x0102_0304], reason: "no"))) == "81cb0002" + "01020304" + "026e6f00")
        #expect(try roundTrip(.goodbye(Goodbye(sources: [1, 2]))) == "82cb0002" + "00000001" + "00000002")
    }

    @Test func genericNACKPacksLossesIntoPIDAndBitmask() throws {
        let nack = GenericNACK(senderSSRC: 1, mediaSSRC: 0x0203_0405, lost: [100, 101, 103, 116, 117])
        #expect(nack.entries == [.init(packetID: 100, lostBitmask: 0x8005), .init(packetID: 117, lostBitmask: 0)])
        #expect(try roundTrip(.nack(nack)) == "81cd0004" + "00000001" + "02030405" + "00648005" + "00750000")
        #expect(nack.lostSequenceNumbers == [100, 101, 103, 116, 117])
    }

    @Test func genericNACKAcrossTheSequenceWrap() throws {
        let nack = GenericNACK(senderSSRC: 1, mediaSSRC: 2, lost: [65535, 0, 2])
        #expect(nack.entries == [.init(packetID: 65535, lostBitmask: 0x0005)])
        #expect(nack.lostSequenceNumbers == [65535, 0, 2])
    }

    @Test func pictureLossIndication() throws {
        #expect(try roundTrip(.pictureLoss(PictureLossIndication(senderSSRC: 1, mediaSSRC: 0x0203_0405)))
                == "81ce0002" + "00000001" + "02030405")
    }

    @Test func fullIntraRequestWithItsSequenceNumber() throws {
        let fir = FullIntraRequest(senderSSRC: 1, entries: [.init(ssrc: 0x0203_0405, sequenceNumber: 7)])
        #expect(try roundTrip(.fullIntraRequest(fir)) == "84ce0004" + "00000001" + "00000000" + "02030405" + "07000000")
    }

    @Test func rembMantissaAndExponent() throws {
        let remb = ReceiverEstimatedMaxBitrate(senderSSRC: 1, bitrate: 6_000_000, ssrcs: [0x0203_0405])
        // 6 000 000 = 187 500 × 2^5 → exp 5, mantissa 0x2dc6c → 0x16dc6c.
        #expect(try roundTrip(.remb(remb)) == "8fce0005" + "00000001" + "00000000" + "52454d42" + "0116dc6c" + "02030405")
        #expect(ReceiverEstimatedMaxBitrate.encode(262_143) == (0, 0x3ffff))
        #expect(ReceiverEstimatedMaxBitrate.encode(262_144) == (1, 0x20000))
        // Precision beyond 18 bits is rounded down.
        let odd = try RTCPCompound.serialize([.remb(ReceiverEstimatedMaxBitrate(senderSSRC: 1, bitrate: 1_000_001, ssrcs: []))])
        guard case .remb(let back) = try RTCPCompound.parse(odd)[0] else { Issue.record("not REMB"); return }
        #expect(back.bitrate == 1_000_000)
    }

    @Test func rembWithAHugeExponentSaturates() throws {
        let bytes = hex("8fce0004" + "00000001" + "00000000" + "52454d42" + "00ffffff")   // exp 63, mantissa 0x3ffff
        guard case .remb(let remb) = try RTCPCompound.parse(bytes)[0] else { Issue.record("not REMB"); return }
        #expect(remb.bitrate == UInt64.max)
        #expect(remb.ssrcs.isEmpty)
    }

    @Test func applicationFeedbackThatIsNotREMBIsKeptUnknown() throws {
        let bytes = hex("8fce0003" + "00000001" + "00000000" + "41424344")
        #expect(try RTCPCompound.parse(bytes) == [.unknown(packetType: 206, count: 15, body: hex("00000001 00000000 41424344"))])
    }

    @Test func transportCCWithATwoBitStatusVector() throws {
        let fb = TransportCCFeedback(senderSSRC: 1, mediaSSRC: 0x0203_0405, baseSequenceNumber: 10, referenceTime: 1,
                                     feedbackPacketCount: 3, receiveDeltas: [1, nil, 400, 2])
        // chunk 0xd240: |1|1| 01 00 10 01 000000; deltas 01, 0190, 02; two bytes of padding.
        #expect(try roundTrip(.transportCC(fb)) ==
            "8fcd0006" + "00000001" + "02030405" + "000a0004" + "00000103" + "d2400101" + "90020000")
        let arrivals = fb.arrivals
        #expect(arrivals.map(\.sequenceNumber) == [10, 11, 12, 13])
        #expect(arrivals.map(\.arrival) == [.microseconds(64_250), nil, .microseconds(164_250), .microseconds(164_750)])
    }

    @Test func transportCCRunLengthAndOneBitChunks() throws {
        #expect(TransportCCFeedback.chunks([1, 1, 1]) == [0x2003])
        #expect(TransportCCFeedback.chunks(Array(repeating: 0, count: 20) + [1]) == [0x0014, 0x2001])
        #expect(TransportCCFeedback.chunks([1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1]) == [0xac01, 0x2001])
        #expect(TransportCCFeedback.chunks([2]) == [0x4001])
        #expect(TransportCCFeedback.chunks(Array(repeating: 1, count: 8192)) == [0x3fff, 0x2001])
    }

    @Test func transportCCNegativeDeltaAndReferenceTime() throws {
        let fb = TransportCCFeedback(senderSSRC: 1, mediaSSRC: 2, baseSequenceNumber: 65535, referenceTime: -1,
                                     feedbackPacketCount: 0, receiveDeltas: [-4, 8])
        // Symbols [2, 1]: a two-bit vector 0xc000 | 10 01 << 8 = 0xe400.
        #expect(try roundTrip(.transportCC(fb)) ==
            "8fcd0006" + "00000001" + "00000002" + "ffff0002" + "ffffff00" + "e400fffc" + "08000000")
        #expect(fb.packets.map(\.sequenceNumber) == [65535, 0])
        #expect(fb.arrivals.map(\.arrival) == [.microseconds(-65_000), .microseconds(-63_000)])
    }

    @Test func transportCCParsesALongRunOfLostPackets() throws {
        // 300 packets, all lost: one run-length chunk 0|00|300, no deltas.
        let bytes = hex("8fcd0005" + "00000001" + "00000002" + "00050" + "12c" + "00000001" + "012c0000")
        guard case .transportCC(let fb) = try RTCPCompound.parse(bytes)[0] else { Issue.record("not TWCC"); return }
        #expect(fb.packets.count == 300)
        #expect(fb.packets.allSatisfy { $0.receiveDelta == nil })
        #expect(fb.packets.last?.sequenceNumber == UInt16(304))
    }

    @Test func compoundSRAndSDESParseInOrder() throws {
        let sr = SenderReport(ssrc: 7, ntpTime: NTPTime(rawValue: 1), rtpTimestamp: 2, packetCount: 3, octetCount: 4)
        let packets: [RTCPPacket] = [.senderReport(sr), .sourceDescription(SourceDescription(ssrc: 7, cname: "castd"))]
        let bytes = try RTCPCompound.serialize(packets)
        #expect(bytes.count == 28 + 16)
        #expect(try RTCPCompound.parse(bytes) == packets)
    }

    @Test func reducedSizeFeedbackParsesAlone() throws {
        // RFC 5506: a lone PLI is a valid datagram when rtcp-rsize was negotiated.
        #expect(try RTCPCompound.parse(hex("81ce000200000001 02030405")) ==
                [.pictureLoss(PictureLossIndication(senderSSRC: 1, mediaSSRC: 0x0203_0405))])
    }

    @Test func paddedPacketsHaveTheirPaddingRemoved() throws {
        // RR with P set and 4 bytes of padding (count in the last octet).
        #expect(try RTCPCompound.parse(hex("a0c90002 deadbeef 00000004")) == [.receiverReport(ReceiverReport(ssrc: 0xdeadbeef))])
    }

    @Test func malformedRTCPThrowsInsteadOfTrapping() {
        #expect(errorCode { _ = try RTCPCompound.parse([]) } == .truncated)
        #expect(errorCode { _ = try RTCPCompound.parse(hex("80c9")) } == .truncated)
        #expect(errorCode { _ = try RTCPCompound.parse(hex("40c90001deadbeef")) } == .malformed)        // version 1
        #expect(errorCode { _ = try RTCPCompound.parse(hex("80c90002deadbeef")) } == .truncated)        // length too long
        #expect(errorCode { _ = try RTCPCompound.parse(hex("81c90001deadbeef")) } == .truncated)        // RC=1, no block
        #expect(errorCode { _ = try RTCPCompound.parse(hex("a0c90001deadbe00")) } == .malformed)        // padding 0
        #expect(errorCode { _ = try RTCPCompound.parse(hex("a0c90001deadbe09")) } == .malformed)        // padding > body
        #expect(errorCode { _ = try RTCPCompound.parse(hex("81cd0002 00000001 00000002")) } == .malformed) // NACK, no FCI
        #expect(errorCode { _ = try RTCPCompound.parse(hex("84ce0003 00000001 00000000 02030405")) } == .malformed) // short FIR
        #expect(errorCode { _ = try RTCPCompound.parse(hex("81ca0002 01020304 0105616263")) } == .truncated) // SDES item past end
        // TWCC: a zero run, a reserved symbol, missing deltas.
        #expect(errorCode { _ = try RTCPCompound.parse(hex("8fcd0005 00000001 00000002 00000001 00000000 00000000")) } == .malformed)
        #expect(errorCode { _ = try RTCPCompound.parse(hex("8fcd0005 00000001 00000002 00000001 00000000 60010000")) } == .malformed)
        #expect(errorCode { _ = try RTCPCompound.parse(hex("8fcd0005 00000001 00000002 00000003 00000000 20030100")) } == .truncated)
    }

    @Test func ntpTimeFromAnInstantAndAWallclockOffset() {
        let ntp = NTPTime(Instant(nanoseconds: 250_000_000), wallclockOffset: .seconds(1_700_000_000))
        // 1 700 000 000 + 2 208 988 800 = 0xe8fe6f80 seconds; 0.25 s = 0x40000000.
        #expect(ntp.rawValue == 0xe8fe_6f80_4000_0000)
        #expect(ntp.compact == 0x6f80_4000)
        #expect(CompactNTPDuration.units(.milliseconds(500)) == 0x8000)
        #expect(CompactNTPDuration.duration(0x0001_8000) == .milliseconds(1500))
    }
}
