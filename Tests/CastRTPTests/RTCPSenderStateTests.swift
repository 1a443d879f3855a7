import Testing
import CastCore
@testable import CastRTP

@Suite struct RTCPSenderStateTests {
    let offset = Duration.seconds(1_700_000_000)

    @Test func noReportBeforeMediaThenOneAtOnceThenEverySecond() throws {
        var s = RTCPSenderState(ssrc: 0x1111, cname: "castd", wallclockOffset: offset)
        do { let v = s.poll(now: ms(0)); #expect(v == nil) }
        #expect(s.nextReportAt == nil)
        s.packetSent(payloadLength: 1000, rtpTimestamp: 90_000, captureTime: ms(10), now: ms(12))
        s.packetSent(payloadLength: 500, rtpTimestamp: 90_000, captureTime: ms(10), now: ms(12))
        let firstPolled = s.poll(now: ms(12))
        let first = try #require(firstPolled)
        guard case .senderReport(let sr) = first[0], case .sourceDescription(let sdes) = first[1] else {
            Issue.record("expected SR + SDES"); return
        }
        #expect(sr.ssrc == 0x1111 && sr.packetCount == 2 && sr.octetCount == 1500)
        #expect(sr.ntpTime == NTPTime(ms(12), wallclockOffset: offset))
        // 2 ms after the capture of timestamp 90 000: 180 ticks later.
        #expect(sr.rtpTimestamp == 90_180)
        #expect(sdes.cname(of: 0x1111) == "castd")
        do { let v = s.poll(now: ms(500)); #expect(v == nil) }
        #expect(s.nextReportAt == ms(1012))
        do { let v = s.poll(now: ms(1012)); #expect(v != nil) }
        #expect(s.nextReportAt == ms(2012))
    }

    @Test func roundTripTimeFromLSRAndDLSR() throws {
        var s = RTCPSenderState(ssrc: 0x1111, cname: "castd", wallclockOffset: offset)
        s.packetSent(payloadLength: 1, rtpTimestamp: 0, captureTime: ms(10_000), now: ms(10_000))
        let reportPolled = s.poll(now: ms(10_000))
        let report = try #require(reportPolled)
        guard case .senderReport(let sr) = report[0] else { Issue.record("no SR"); return }
        // The receiver held the SR 0.5 s (DLSR 0x8000) and its report arrives 600 ms after we sent it.
        let block = ReportBlock(ssrc: 0x1111, fractionLost: 64, cumulativeLost: 12, extendedHighestSequence: 70_000,
                                jitter: 900, lastSenderReport: sr.ntpTime.compact, delaySinceLastSenderReport: 0x8000)
        let stats = s.received(block, now: ms(10_600))
        #expect(stats.roundTripTime == .milliseconds(100))
        #expect(stats.fractionLost == 0.25)
        #expect(stats.cumulativeLost == 12)
        #expect(stats.jitter == .milliseconds(10))    // 900 ticks at 90 kHz
        #expect(s.roundTripTime == .milliseconds(100))
    }

    @Test func blocksWithoutAKnownSRGiveNoRTT() {
        var s = RTCPSenderState(ssrc: 1, cname: "c", wallclockOffset: offset)
        let none = ReportBlock(ssrc: 1, fractionLost: 0, cumulativeLost: 0, extendedHighestSequence: 0, jitter: 0,
                               lastSenderReport: 0, delaySinceLastSenderReport: 0)
        do { let v = s.received(none, now: ms(5)); #expect(v.roundTripTime == nil) }
        var unknown = none
        unknown.lastSenderReport = 0x1234_5678
        do { let v = s.received(unknown, now: ms(5)); #expect(v.roundTripTime == nil) }
    }

    @Test func keyframeRequestsAreLimitedTo1Per500ms() {
        var k = KeyframeRequestLimiter()
        do { let v = k.pictureLoss(now: ms(0)); #expect(v) }
        do { let v = k.pictureLoss(now: ms(100)); #expect(!v) }
        do { let v = k.pictureLoss(now: ms(499)); #expect(!v) }
        do { let v = k.pictureLoss(now: ms(500)); #expect(v) }
        do { let v = k.fullIntraRequest(from: 9, sequenceNumber: 1, now: ms(1200)); #expect(v) }
        // The same FIR again (a retransmission) is not a new request, even later.
        do { let v = k.fullIntraRequest(from: 9, sequenceNumber: 1, now: ms(2000)); #expect(!v) }
        do { let v = k.fullIntraRequest(from: 9, sequenceNumber: 2, now: ms(2000)); #expect(v) }
        // A keyframe sent for another reason also satisfies requests for 500 ms.
        k.keyframeSent(now: ms(3000))
        do { let v = k.pictureLoss(now: ms(3200)); #expect(!v) }
    }

    @Test func transportCCFeedbackBecomesAnArrivalRateAndLoss() {
        var t = TransportCCTracker(initialSequenceNumber: 100)
        for _ in 0..<4 { _ = t.allocate(size: 1250) }
        // 100 at 0, 101 lost, 102 at +1 ms, 103 at +2 ms → 2 × 1250 bytes over 2 ms = 10 Mbit/s.
        let fb = TransportCCFeedback(senderSSRC: 1, mediaSSRC: 2, baseSequenceNumber: 100, referenceTime: 0,
                                     feedbackPacketCount: 0, receiveDeltas: [0, nil, 4, 4])
        #expect(t.estimate(fb) == BandwidthEstimate(source: .transportCC, bitsPerSecond: 10_000_000, lossFraction: 0.25))
        let unknown = TransportCCFeedback(senderSSRC: 1, mediaSSRC: 2, baseSequenceNumber: 5000, referenceTime: 0,
                                          feedbackPacketCount: 0, receiveDeltas: [0])
        #expect(t.estimate(unknown) == nil)
    }
}

/// The SR + SDES compound written straight into a reused buffer (issue 19).
@Suite struct RTCPSenderStateCompoundTests {
    @Test func theCompoundWrittenInPlaceIsTheSerialisedOneInTheGivenStorage() throws {
        let offset = Duration.seconds(1_700_000_000)
        var a = RTCPSenderState(ssrc: 0x1111, cname: "castd-cname-0123", wallclockOffset: offset)
        var b = a
        var buffer: [UInt8] = []
        buffer.reserveCapacity(512)
        buffer.append(contentsOf: [0xee, 0xee])   // what a sent datagram left: overwritten
        let storage = buffer.withUnsafeBytes { $0.baseAddress }
        #expect(!b.isReportDue(now: ms(0)))
        #expect(b.pollCompound(now: ms(0), into: []) == nil)
        for s in [0, 1] {
            for k in 0..<3 {
                a.packetSent(payloadLength: 900 + k, rtpTimestamp: UInt32(3000 * s), captureTime: ms(Int64(s) * 1000), now: ms(Int64(s) * 1000 + 5))
                b.packetSent(payloadLength: 900 + k, rtpTimestamp: UInt32(3000 * s), captureTime: ms(Int64(s) * 1000), now: ms(Int64(s) * 1000 + 5))
            }
            let now = ms(Int64(s) * 1000 + 5)
            #expect(b.isReportDue(now: now))
            let polled = a.poll(now: now)
            let expected = try RTCPCompound.serialize(try #require(polled))
            let compound = b.pollCompound(now: now, into: consume buffer)   // moved in, as from a pool
            let written = try #require(compound)
            #expect(written == expected)
            #expect(!b.isReportDue(now: now) && a.nextReportAt == b.nextReportAt)
            #expect(written.withUnsafeBytes { $0.baseAddress } == storage)
            buffer = written
        }
    }
}
