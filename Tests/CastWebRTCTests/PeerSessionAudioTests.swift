import CastCore
import CastOpenSSL
import CastRTP
import Foundation
import Testing
import LibSRTP
@testable import CastWebRTC

/// Issue 18: a whole `PeerSession` offering audio, against a receiver made of
/// `ControlledPeer` (ICE), a `DTLSTransport` client and SRTP, on a fake clock.
/// Audio leaves at once (not behind the video pacer), both streams draw from one
/// transport-wide sequence, both get sender reports, and the receiver's loss
/// reports move the Opus encoder's expected loss.
@Suite struct PeerSessionAudioTests {
    static let castdCert = try! Certificate(commonName: "castd", notBeforeUnix: 1_767_225_600)
    static let rxCert = try! Certificate(commonName: "receiver", notBeforeUnix: 1_767_225_600)
    static let local = SocketAddress(IPAddress("192.0.2.1")!, 40000)
    static let remote = SocketAddress(IPAddress("192.0.2.2")!, 53694)

    /// Chrome's answer to video alone, with the audio section Chrome gave to castd's audio offer.
    static func answer(audioPort: Int = 9) throws -> String {
        var video = try ChromeFixture.text("chrome-answer-no-mdns.sdp")
        let fp = try #require(video.split(separator: "\r\n").first { $0.hasPrefix("a=fingerprint:") })
        video = video.replacingOccurrences(of: String(fp), with: "a=fingerprint:" + rxCert.fingerprint().sdpValue)
            .replacingOccurrences(of: "a=group:BUNDLE 0", with: "a=group:BUNDLE 0 1")
        let full = try ChromeFixture.text("chrome-answer-main-audio.sdp")
        let audio = try #require(full.range(of: "m=audio")).lowerBound
        let section = String(full[audio...])
            .split(separator: "\r\n").filter { !$0.hasPrefix("a=ice-") && !$0.hasPrefix("a=fingerprint") }
            .joined(separator: "\r\n") + "\r\n"
        return video + section.replacingOccurrences(of: "m=audio 9 ", with: "m=audio \(audioPort) ")
    }

    final class Harness {
        let session: PeerSession
        var peer: ControlledPeer
        let dtls: DTLSTransport
        var now = Instant.zero + .seconds(10)
        var inbound: SRTPSession?
        var outbound: SRTPSession?
        /// Decrypted RTP from castd, with the instant it left.
        var rtp: [(at: Instant, packet: RTPPacket)] = []
        var rtcp: [RTCPPacket] = []
        var events: [PeerSession.Event] = []

        init(audioPort: Int = 9) throws {
            var rng = SeededRandom(seed: 11)
            var config = PeerSession.Configuration(wallclockOffset: .seconds(1_767_225_600))
            config.audio = true
            session = try PeerSession(configuration: config, certificate: PeerSessionAudioTests.castdCert, random: &rng)
            session.addLocalAddress(PeerSessionAudioTests.local, now: now)
            session.endOfLocalAddresses(now: now)
            let offer = session.offerSDP
            let ufrag = try #require(offer.split(separator: "\r\n").first { $0.hasPrefix("a=ice-ufrag:") }?.dropFirst(12))
            let pwd = try #require(offer.split(separator: "\r\n").first { $0.hasPrefix("a=ice-pwd:") }?.dropFirst(10))
            peer = ControlledPeer(ufrag: "+cA8", pwd: "0F+PdvI6RgSnCm97rftTfk5D", remoteUfrag: String(ufrag),
                                  remotePwd: String(pwd), addresses: [PeerSessionAudioTests.remote])
            dtls = try DTLSTransport(role: .client, certificate: PeerSessionAudioTests.rxCert,
                                     remoteFingerprint: PeerSessionAudioTests.castdCert.fingerprint())
            try session.applyAnswer(try PeerSessionAudioTests.answer(audioPort: audioPort), now: now)
            dtls.handle(.start, now: now)
        }

        func exchange() {
            var progress = true
            while progress {
                progress = false
                while let o = session.poll() {
                    progress = true
                    guard case .transmit(let t) = o else {
                        if case .event(let e) = o { events.append(e) }
                        continue
                    }
                    switch PacketKind(classifying: t.bytes) {
                    case .stun: peer.handle(ICETransmit(from: t.from, to: t.to, datagram: t.bytes))
                    case .dtls: dtls.handle(.datagram(t.bytes), now: now)
                    case .rtpOrRtcp:
                        guard let srtp = inbound else { break }
                        if (192...223).contains(t.bytes[1]) {
                            if let plain = try? srtp.unprotectRTCP(t.bytes), let p = try? RTCPCompound.parse(plain) { rtcp += p }
                        } else if let plain = try? srtp.unprotectRTP(t.bytes), let p = try? RTPPacket.parse(plain) {
                            rtp.append((now, p))
                        }
                    default: break
                    }
                }
                while !peer.outbox.isEmpty {
                    progress = true
                    let t = peer.outbox.removeFirst()
                    session.handle(.datagram(t.datagram, from: t.from, to: t.to), now: now)
                }
                while let o = dtls.poll() {
                    switch o {
                    case .transmit(let d):
                        progress = true
                        session.handle(.datagram(d, from: PeerSessionAudioTests.remote, to: PeerSessionAudioTests.local), now: now)
                    case .event(.connected(let keys)):
                        inbound = try? keys.inboundSession()
                        outbound = try? keys.outboundSession()
                    case .event: break
                    }
                }
            }
        }

        func advance(to t: Instant) {
            exchange()
            while now < t {
                now = min([session.nextDeadline(), dtls.nextDeadline()].compactMap { $0 }.filter { $0 > now }.min() ?? t, t)
                session.handleTimeout(now: now)
                dtls.handleTimeout(now: now)
                exchange()
            }
        }

        /// One RTCP compound from the receiver, protected with its SRTCP keys.
        func receiverSends(_ packets: [RTCPPacket]) throws {
            let bytes = try #require(outbound).protectRTCP(try RTCPCompound.serialize(packets))
            session.handle(.datagram(bytes, from: PeerSessionAudioTests.remote, to: PeerSessionAudioTests.local), now: now)
            exchange()
        }

        func connect() throws {
            advance(to: now + .seconds(5))
            try #require(session.state == .connected)
            try #require(inbound != nil)
        }
    }

    /// One IDR slice NAL unit in Annex B: enough for the packetizer.
    static let idr: [UInt8] = [0, 0, 0, 1, 0x65, 0x88, 0x84, 0x00, 0x33, 0xff]

    static func frame(at t: Instant, bytes: Int = 160) -> EncodedAudioFrame {
        EncodedAudioFrame(opus: Array(repeating: 0xAB, count: bytes), samples: 960, captureTime: t)
    }

    static func transportSequence(_ p: RTPPacket) -> UInt16? {
        p.header.extensions?.element(id: 3).flatMap { try? RTPExtensionValue.parseTransportSequence($0) }
    }

    @Test func theAnswerAcceptsAudioAndItsFramesLeaveWithTheirOwnSSRCAndPayloadType() throws {
        let h = try Harness()
        #expect(h.session.offerSDP.contains("m=audio 9 UDP/TLS/RTP/SAVPF 111"))
        h.exchange()
        #expect(h.events.contains(.audioAccepted))
        #expect(h.session.sendsAudio)
        // Before the connection is up a frame cannot go: dropped and counted.
        h.session.sendAudio(Self.frame(at: h.now), now: h.now)
        #expect(h.session.statistics.audioFramesDropped == 1)
        try h.connect()
        h.session.sendAccessUnit(Self.idr, captureTime: h.now, now: h.now)
        for _ in 0..<5 { h.advance(to: h.now + .milliseconds(20)); h.session.sendAudio(Self.frame(at: h.now), now: h.now) }
        h.exchange()
        let audio = h.rtp.map(\.packet).filter { $0.header.payloadType == 111 }
        #expect(audio.count == 5)
        let videoSSRCs = Set(h.rtp.map(\.packet).filter { $0.header.payloadType != 111 }.map(\.header.ssrc))
        #expect(Set(audio.map(\.header.ssrc)).count == 1)
        #expect(!videoSSRCs.isEmpty)
        #expect(videoSSRCs.isDisjoint(with: audio.map(\.header.ssrc)))
        #expect(h.session.offerSDP.contains("a=ssrc:\(audio[0].header.ssrc) cname:"))
        #expect(audio.map(\.payload.count) == Array(repeating: 160, count: 5))
        #expect(h.session.statistics.audio?.framesSent == 5)
    }

    /// Audio is not paced: a frame given while a large keyframe drains through the pacer
    /// leaves at that instant, and audio and video share one transport-wide sequence.
    @Test func audioIsNotHeldBehindAKeyframeAndSharesTheTransportSequence() throws {
        let h = try Harness()
        try h.connect()
        h.rtp.removeAll()
        let keyframe: [UInt8] = [0, 0, 0, 1, 0x65] + Array(repeating: 0x5a, count: 150_000)
        h.session.sendAccessUnit(keyframe, captureTime: h.now, now: h.now)
        h.advance(to: h.now + .milliseconds(5))
        #expect(h.session.mediaBacklog > .milliseconds(50), "the keyframe should still be queued")
        let at = h.now
        h.session.sendAudio(Self.frame(at: at), now: at)
        h.exchange()
        let audio = try #require(h.rtp.first { $0.packet.header.payloadType == 111 })
        #expect(audio.at == at)
        #expect(h.session.mediaBacklog > .milliseconds(40))
        h.advance(to: h.now + .seconds(1))
        let seqs = h.rtp.compactMap { Self.transportSequence($0.packet) }
        #expect(seqs.count == h.rtp.count, "every packet carries the transport-wide sequence")
        #expect(Set(seqs).count == seqs.count, "no number twice")
        let sorted = seqs.sorted()
        #expect(sorted.last! - sorted.first! == UInt16(seqs.count - 1), "one contiguous sequence")
        #expect(Self.transportSequence(audio.packet).map { sorted.contains($0) } == true)
    }

    /// RFC 3550 §6.4.1: both SSRCs get sender reports, from the one wallclock offset.
    @Test func bothStreamsGetSenderReportsWithOneCNAME() throws {
        let h = try Harness()
        try h.connect()
        h.session.sendAccessUnit(Self.idr, captureTime: h.now, now: h.now)
        for _ in 0..<100 {
            h.session.sendAudio(Self.frame(at: h.now), now: h.now)
            h.advance(to: h.now + .milliseconds(20))
        }
        let audioSSRC = try #require(h.rtp.first { $0.packet.header.payloadType == 111 }?.packet.header.ssrc)
        let reporters = Set(h.rtcp.compactMap { p -> UInt32? in if case .senderReport(let sr) = p { return sr.ssrc } else { return nil } })
        #expect(reporters.contains(audioSSRC))
        #expect(reporters.count == 2)
        var cnames = Set<String>()
        for p in h.rtcp { if case .sourceDescription(let s) = p { for c in s.chunks { if let n = s.cname(of: c.source) { cnames.insert(n) } } } }
        #expect(cnames.count == 1)
    }

    /// The receiver reports loss on the audio SSRC: the encoder should plan for ≥ 10 %.
    @Test func reportedAudioLossRaisesTheExpectedLoss() throws {
        let h = try Harness()
        try h.connect()
        for _ in 0..<10 {
            h.session.sendAudio(Self.frame(at: h.now), now: h.now)
            h.advance(to: h.now + .milliseconds(20))
        }
        #expect(h.session.statistics.audioExpectedLossPercent == 0)
        let ssrc = try #require(h.rtp.first { $0.packet.header.payloadType == 111 }?.packet.header.ssrc)
        let block = ReportBlock(ssrc: ssrc, fractionLost: 13, cumulativeLost: 1, extendedHighestSequence: 10,
                                jitter: 0, lastSenderReport: 0, delaySinceLastSenderReport: 0)
        try h.receiverSends([.receiverReport(ReceiverReport(ssrc: 99, reports: [block]))])
        #expect(h.session.statistics.audioExpectedLossPercent == 10)
    }

    @Test func aRejectedAudioLineMeansVideoOnly() throws {
        let h = try Harness(audioPort: 0)
        h.exchange()
        #expect(h.events.contains(.audioRejected("the receiver rejected the audio m-line (port 0)")))
        #expect(!h.session.sendsAudio)
        try h.connect()
        h.session.sendAudio(Self.frame(at: h.now), now: h.now)
        h.session.sendAccessUnit(Self.idr, captureTime: h.now, now: h.now)
        h.advance(to: h.now + .milliseconds(100))
        #expect(h.rtp.contains { $0.packet.header.payloadType == 102 })
        #expect(!h.rtp.contains { $0.packet.header.payloadType == 111 })
        #expect(h.session.statistics.audioFramesDropped == 1)
    }
}
