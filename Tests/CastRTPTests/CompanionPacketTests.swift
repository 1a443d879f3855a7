import Testing
import CastCore
@testable import CastRTP

/// Issue 18: audio shares the transport-wide sequence with video (one allocator, the
/// video sender's), and the estimator counts its packets, so feedback about them is matched.
@Suite struct CompanionPacketTests {
    func sender(transportCC: UInt8? = 3) throws -> VideoSender {
        var rng = SeededRandom(seed: 42)
        return try VideoSender(configuration: .init(payloadType: 102, rtxPayloadType: 103, cname: "castd-test",
                                                    extensionIDs: .init(transportCC: transportCC),
                                                    wallclockOffset: .seconds(1_700_000_000),
                                                    congestion: .init(probing: false)),
                               random: &rng)
    }

    @Test func audioAndVideoDrawFromOneTransportWideSequence() throws {
        var s = try sender()
        let audio = (0..<3).compactMap { s.registerCompanionPacket(size: 180, now: ms(Int64($0) * 20)) }
        #expect(audio == [1, 2, 3])
        let au: [UInt8] = [0, 0, 0, 1, 0x65] + Array(repeating: 0x5a, count: 500)
        s.handle(.accessUnit(au, captureTime: ms(60)), now: ms(60))
        let video = try s.datagrams(at: ms(60)).compactMap { d -> UInt16? in
            guard case .rtp(let b) = d else { return nil }
            return try RTPExtensionValue.parseTransportSequence(try RTPPacket.parse(b).header.extensions!.element(id: 3)!)
        }
        #expect(video == [4])
        #expect(s.registerCompanionPacket(size: 180, now: ms(80)) == 5)
    }

    @Test func withoutTransportCCThereIsNoSequenceToDraw() throws {
        var s = try sender(transportCC: nil)
        #expect(s.registerCompanionPacket(size: 180, now: ms(0)) == nil)
    }

    /// A feedback that reports an audio packet lost (a later one arrived past the
    /// reordering window) is a confirmed loss: the estimator knew the packet.
    @Test func feedbackAboutAudioPacketsIsMatched() throws {
        var s = try sender()
        for i in 0..<10 { _ = s.registerCompanionPacket(size: 180, now: ms(Int64(i) * 20)) }
        // Seq 1 at the reference time, 2 lost, 3…10 every 20 ms (80 × 250 µs).
        var deltas: [Int16?] = [0, nil]
        deltas += Array(repeating: Int16(160), count: 1) + Array(repeating: Int16(80), count: 7)
        let fb = TransportCCFeedback(senderSSRC: 1, mediaSSRC: s.ssrc, baseSequenceNumber: 1, referenceTime: 0,
                                     feedbackPacketCount: 0, receiveDeltas: deltas)
        _ = s.events(afterRTCP: try RTCPCompound.serialize([.transportCC(fb)]), now: ms(250))
        #expect(s.statistics.lossesConfirmed == 1)
    }
}
