import CastCore
import CastOpenSSL
import Foundation
import Testing
@testable import CastWebRTC

/// A whole `PeerSession` against a receiver made of `ControlledPeer` (ICE) and a
/// `DTLSTransport` client (Chrome's `a=setup:active`), on a fake clock: what castd
/// sends when the receiver stops answering its consent checks (RFC 7675).
@Suite struct PeerSessionConsentTests {
    static let castdCert = try! Certificate(commonName: "castd", notBeforeUnix: 1_767_225_600)
    static let rxCert = try! Certificate(commonName: "receiver", notBeforeUnix: 1_767_225_600)
    static let local = SocketAddress(IPAddress("192.0.2.1")!, 40000)
    static let remote = SocketAddress(IPAddress("192.0.2.2")!, 53694)
    /// One IDR slice NAL unit in Annex B: enough for the packetizer.
    static let accessUnit: [UInt8] = [0, 0, 0, 1, 0x65, 0x88, 0x84, 0x00, 0x33, 0xff]

    final class Harness {
        let session: PeerSession
        var peer: ControlledPeer
        let dtls: DTLSTransport
        var now = Instant.zero + .seconds(10)
        var rtpAt: [Instant] = []
        var states: [(at: Instant, state: PeerSession.State)] = []

        init() throws {
            var rng = SeededRandom(seed: 11)
            session = try PeerSession(configuration: .init(wallclockOffset: .zero), certificate: PeerSessionConsentTests.castdCert,
                                      random: &rng)
            session.addLocalAddress(PeerSessionConsentTests.local, now: now)
            session.endOfLocalAddresses(now: now)
            let offer = session.offerSDP
            let ufrag = try #require(offer.split(separator: "\r\n").first { $0.hasPrefix("a=ice-ufrag:") }?.dropFirst(12))
            let pwd = try #require(offer.split(separator: "\r\n").first { $0.hasPrefix("a=ice-pwd:") }?.dropFirst(10))
            peer = ControlledPeer(ufrag: "+cA8", pwd: "0F+PdvI6RgSnCm97rftTfk5D", remoteUfrag: String(ufrag),
                                  remotePwd: String(pwd), addresses: [PeerSessionConsentTests.remote])
            dtls = try DTLSTransport(role: .client, certificate: PeerSessionConsentTests.rxCert,
                                     remoteFingerprint: PeerSessionConsentTests.castdCert.fingerprint())
            var answer = try ChromeFixture.text("chrome-answer-no-mdns.sdp")
            let fp = try #require(answer.split(separator: "\r\n").first { $0.hasPrefix("a=fingerprint:") })
            answer = answer.replacingOccurrences(of: String(fp), with: "a=fingerprint:" + PeerSessionConsentTests.rxCert.fingerprint().sdpValue)
            try session.applyAnswer(answer, now: now)
            dtls.handle(.start, now: now)
        }

        /// Moves every datagram until nothing is left at this instant.
        func exchange() {
            var progress = true
            while progress {
                progress = false
                while let o = session.poll() {
                    progress = true
                    guard case .transmit(let t) = o else {
                        if case .event(.stateChanged(let s)) = o { states.append((now, s)) }
                        continue
                    }
                    switch PacketKind(classifying: t.bytes) {
                    case .stun:
                        peer.handle(ICETransmit(from: t.from, to: t.to, datagram: t.bytes))
                    case .dtls: dtls.handle(.datagram(t.bytes), now: now)
                    case .rtpOrRtcp:
                        if t.bytes.count > 1, (t.bytes[1] & 0x7f) < 64 || (t.bytes[1] & 0x7f) > 95 { rtpAt.append(now) }
                    default: break
                    }
                }
                while !peer.outbox.isEmpty {
                    progress = true
                    let t = peer.outbox.removeFirst()
                    session.handle(.datagram(t.datagram, from: t.from, to: t.to), now: now)
                }
                while let o = dtls.poll() {
                    guard case .transmit(let d) = o else { continue }
                    progress = true
                    session.handle(.datagram(d, from: PeerSessionConsentTests.remote, to: PeerSessionConsentTests.local), now: now)
                }
            }
        }

        /// Runs the clock to `until`, sending an access unit every 100 ms.
        func run(until: Instant) {
            var nextFrame = now
            exchange()
            while now < until {
                let next = [session.nextDeadline(), dtls.nextDeadline(), nextFrame].compactMap { $0 }.filter { $0 > now }.min() ?? until
                now = min(next, until)
                if now >= nextFrame {
                    session.sendAccessUnit(PeerSessionConsentTests.accessUnit, captureTime: now, now: now)
                    nextFrame = now + .milliseconds(100)
                }
                session.handleTimeout(now: now)
                dtls.handleTimeout(now: now)
                exchange()
            }
        }
    }

    @Test func mediaGoesOnWhileDisconnectedAndStopsWhenConsentExpires() throws {
        let h = try Harness()
        // DTLS retransmits the receiver's first flight (sent before ICE had a pair) after 1–2 s.
        h.run(until: h.now + .seconds(8))
        #expect(h.session.state == .connected)
        #expect(!h.rtpAt.isEmpty)
        // The receiver stops answering (its answers are lost on the way back).
        h.peer.answering = false
        let silent = h.now
        h.run(until: silent + .seconds(40))
        let disconnected = try #require(h.states.first { $0.state == .disconnected && $0.at > silent }?.at)
        let failed = try #require(h.states.first { $0.state == .failed }?.at)
        #expect(h.states.map(\.state).suffix(2) == [.disconnected, .failed])
        // RFC 7675 §5.1: consent lasts 30 s after the last answer; ICE marks the path
        // disconnected after 7 s of silence but media goes on until consent expires …
        #expect(disconnected - silent <= .seconds(7))
        #expect(failed - silent > .seconds(24) && failed - silent <= .seconds(30))
        let whileDisconnected = h.rtpAt.filter { $0 > disconnected + .seconds(1) && $0 < failed }
        #expect(whileDisconnected.count >= 100, "\(whileDisconnected.count) RTP packets while disconnected")
        // … and not a packet after.
        #expect(h.rtpAt.allSatisfy { $0 <= failed })
        #expect(h.session.statistics.accessUnitsDropped > 0)
    }
}
