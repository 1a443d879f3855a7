import Testing
import CastCore
import CastOpenSSL
import LibSRTP
import SansIOContract
@testable import CastWebRTC

extension SeededRandom {
    /// True with probability `p` (53 random bits against p).
    mutating func chance(_ p: Double) -> Bool { Double(next() >> 11) / Double(1 << 53) < p }
}

/// Two DTLSTransports joined by a simulated link (one-way delay, loss) and
/// driven by a fake clock: every step jumps to the next delivery or deadline.
final class SimulatedLink {
    struct InFlight { var at: Instant; var toServer: Bool; var datagram: [UInt8] }

    let client: DTLSTransport
    let server: DTLSTransport
    var now = Instant(nanoseconds: 1_000_000_000)
    var rng: SeededRandom
    let loss: Double
    let delay = Duration.milliseconds(15)
    var dropFirstFlights: Bool
    var inFlight: [InFlight] = []
    var sent = (client: 0, server: 0)
    var dropped = 0
    var clientEvent: DTLSTransport.Event?
    var serverEvent: DTLSTransport.Event?
    var extraEvents = 0

    init(client: DTLSTransport, server: DTLSTransport, seed: UInt64, loss: Double, dropFirstFlights: Bool) {
        self.client = client
        self.server = server
        self.rng = SeededRandom(seed: seed)
        self.loss = loss
        self.dropFirstFlights = dropFirstFlights
    }

    private func collect() {
        let first = (client: sent.client == 0, server: sent.server == 0)
        for (t, slot) in [(client, 0), (server, 1)] {
            while let o = t.poll() {
                switch o {
                case .transmit(let d):
                    if slot == 0 { sent.client += 1 } else { sent.server += 1 }
                    send(d, toServer: slot == 0, forceDrop: dropFirstFlights && (slot == 0 ? first.client : first.server))
                case .event(let e):
                    if slot == 0 { if clientEvent == nil { clientEvent = e } else { extraEvents += 1 } }
                    else { if serverEvent == nil { serverEvent = e } else { extraEvents += 1 } }
                }
            }
        }
    }

    private func send(_ d: [UInt8], toServer: Bool, forceDrop: Bool) {
        if forceDrop || rng.chance(loss) {
            dropped += 1
            return
        }
        inFlight.append(InFlight(at: now + delay, toServer: toServer, datagram: d))
    }

    /// Runs until both sides reported an event or nothing is left to happen.
    func run(limit: Duration = .seconds(300)) {
        let end = now + limit
        client.handle(.start, now: now)
        server.handle(.start, now: now)
        collect()
        while clientEvent == nil || serverEvent == nil {
            let candidates = inFlight.map(\.at) + [client.nextDeadline(), server.nextDeadline()].compactMap { $0 }
            guard let next = candidates.min(), next <= end else { return }
            now = next
            let due = inFlight.filter { $0.at <= now }
            inFlight.removeAll { $0.at <= now }
            for f in due {
                (f.toServer ? server : client).handle(.datagram(f.datagram), now: now)
                collect()
            }
            client.handleTimeout(now: now)
            server.handleTimeout(now: now)
            collect()
        }
    }
}

@Suite struct DTLSTransportTests {
    static let certA = try! Certificate(commonName: "castd", notBeforeUnix: 1_767_225_600)
    static let certB = try! Certificate(commonName: "peer", notBeforeUnix: 1_767_225_600)

    func keys(_ e: DTLSTransport.Event?) -> SRTPKeyingMaterial? {
        if case .connected(let k) = e { return k }
        return nil
    }

    func failure(_ e: DTLSTransport.Event?) -> CastError? {
        if case .failed(let err) = e { return err }
        return nil
    }

    /// Drains `t`, keeping its events (its records have nowhere to go).
    func events(_ t: DTLSTransport) -> [DTLSTransport.Event] {
        var out: [DTLSTransport.Event] = []
        while let o = t.poll() { if case .event(let e) = o { out.append(e) } }
        return out
    }

    /// The Must-show: first flights dropped, random loss on a seeded RNG,
    /// fake clock; both connect, keys match crosswise, media flows.
    @Test(arguments: [UInt64(1), 2, 3, 4, 5, 6, 7, 8])
    func handshakeSurvivesLossOnAFakeClockAndKeysInteroperate(seed: UInt64) throws {
        let client = try DTLSTransport(role: .client, certificate: Self.certA, remoteFingerprint: Self.certB.fingerprint())
        let server = try DTLSTransport(role: .server, certificate: Self.certB, remoteFingerprint: Self.certA.fingerprint())
        let link = SimulatedLink(client: client, server: server, seed: seed, loss: 0.2, dropFirstFlights: true)
        let start = link.now
        link.run()
        let ck = try #require(keys(link.clientEvent), "client: \(String(describing: link.clientEvent))")
        let sk = try #require(keys(link.serverEvent), "server: \(String(describing: link.serverEvent))")
        #expect(link.extraEvents == 0)
        #expect(link.dropped >= 2)
        // The dropped ClientHello is only resent after the 1 s timer.
        #expect(link.now - start >= .seconds(1))
        #expect(link.now - start < .seconds(200))
        #expect(ck.profile == .aeadAes128Gcm && sk.profile == .aeadAes128Gcm)
        #expect(ck.localKey == sk.remoteKey && ck.localSalt == sk.remoteSalt)
        #expect(ck.remoteKey == sk.localKey && ck.remoteSalt == sk.localSalt)
        #expect(ck.localKey != ck.remoteKey)
        #expect(client.keyingMaterial == ck && server.keyingMaterial == sk)
        #expect(client.isConnected && server.isConnected)

        // RTP protected by one side is unprotected by the other, both ways.
        let rtp: [UInt8] = [0x80, 0x66, 0x00, 0x01, 0, 0, 0x0b, 0xb8, 0xde, 0xad, 0xbe, 0xef] + Array(repeating: 0x42, count: 200)
        let fromClient = try ck.outboundSession().protectRTP(rtp)
        #expect(try sk.inboundSession().unprotectRTP(fromClient) == rtp)
        let fromServer = try sk.outboundSession().protectRTP(rtp)
        #expect(fromServer != fromClient)
        #expect(try ck.inboundSession().unprotectRTP(fromServer) == rtp)
        // And a session keyed the wrong way round rejects it.
        let wrong = try SRTPSession(profile: ck.profile, key: ck.localKey, salt: ck.localSalt, direction: .inbound)
        #expect(throws: CastError.self) { try wrong.unprotectRTP(fromServer) }
    }

    @Test func noLossIsFastAndSilentAfterwards() throws {
        let client = try DTLSTransport(role: .client, certificate: Self.certA, remoteFingerprint: Self.certB.fingerprint())
        let server = try DTLSTransport(role: .server, certificate: Self.certB, remoteFingerprint: Self.certA.fingerprint())
        let link = SimulatedLink(client: client, server: server, seed: 0, loss: 0, dropFirstFlights: false)
        let start = link.now
        link.run()
        #expect(keys(link.clientEvent) != nil && keys(link.serverEvent) != nil)
        // Two round trips of 15 ms each way: flights 1-2, 3-4 (RFC 6347 §4.2.4 without cookies).
        #expect(link.now - start == .milliseconds(60))
        #expect(link.dropped == 0)
        #expect(client.nextDeadline() == nil && server.nextDeadline() == nil)
        #expect(client.poll() == nil && server.poll() == nil)
        // Hanging up: the peer learns it from close_notify, which leaves before the
        // client's own event (decision order).
        client.handle(.close, now: link.now)
        guard case .transmit(let notify)? = client.poll() else { Issue.record("no close_notify first"); return }
        server.handle(.datagram(notify), now: link.now)
        guard case .event(let own)? = client.poll() else { Issue.record("no event after close_notify"); return }
        #expect(failure(own)?.code == .dtlsClosed)
        #expect(client.poll() == nil)
        let heard = events(server)
        #expect(heard.count == 1 && failure(heard.first)?.code == .dtlsClosed)
    }

    @Test func fingerprintMismatchFailsBothAndExportsNoKeys() throws {
        let impostor = try Certificate(commonName: "peer", notBeforeUnix: 1_767_225_600)
        let client = try DTLSTransport(role: .client, certificate: Self.certA, remoteFingerprint: impostor.fingerprint())
        let server = try DTLSTransport(role: .server, certificate: Self.certB, remoteFingerprint: Self.certA.fingerprint())
        let link = SimulatedLink(client: client, server: server, seed: 9, loss: 0, dropFirstFlights: false)
        link.run()
        let c = try #require(failure(link.clientEvent), "client: \(String(describing: link.clientEvent))")
        let s = try #require(failure(link.serverEvent), "server: \(String(describing: link.serverEvent))")
        #expect(c.code == .fingerprintMismatch)
        #expect(s.code == .handshake)
        #expect(client.keyingMaterial == nil && server.keyingMaterial == nil)
        #expect(!client.isConnected && !server.isConnected)
        #expect(link.extraEvents == 0)
    }

    @Test func castdAsServerRejectsAPeerWithTheWrongCertificate() throws {
        let impostor = try Certificate(commonName: "castd", notBeforeUnix: 1_767_225_600)
        let peer = try DTLSTransport(role: .client, certificate: impostor, remoteFingerprint: Self.certB.fingerprint())
        let castd = try DTLSTransport(role: .server, certificate: Self.certB, remoteFingerprint: Self.certA.fingerprint(.sha512))
        let link = SimulatedLink(client: peer, server: castd, seed: 10, loss: 0, dropFirstFlights: false)
        link.run()
        #expect(failure(link.serverEvent)?.code == .fingerprintMismatch)
        #expect(failure(link.clientEvent) != nil)
        #expect(castd.keyingMaterial == nil && peer.keyingMaterial == nil)
    }

    @Test func silentPeerTimesOutOnTheSchedule() throws {
        let client = try DTLSTransport(role: .client, certificate: Self.certA, remoteFingerprint: Self.certB.fingerprint(),
                                       schedule: DTLSRetransmitSchedule(maxRetransmissions: 3))
        let t0 = Instant(nanoseconds: 0)
        client.handle(.start, now: t0)
        var sent = 0
        var seen: [DTLSTransport.Event] = []
        func drain() {
            while let o = client.poll() {
                switch o {
                case .transmit: sent += 1
                case .event(let e): seen.append(e)
                }
            }
        }
        var t = t0
        while let d = client.nextDeadline() {
            drain()
            t = d
            client.handleTimeout(now: t)
        }
        drain()
        #expect(sent == 4)  // ClientHello + 3 retransmissions
        #expect(t - t0 == .seconds(1 + 2 + 4 + 8))
        #expect(seen.map { failure($0)?.code } == [.handshakeTimeout])
    }

    @Test func roleFollowsTheAnswersSetupAttribute() {
        #expect(DTLSTransport.Role(answerSetup: "active") == .server)
        #expect(DTLSTransport.Role(answerSetup: "PASSIVE") == .client)
        #expect(DTLSTransport.Role(answerSetup: "actpass") == nil)
        #expect(DTLSTransport.isDTLS(firstByte: 22) && DTLSTransport.isDTLS(firstByte: 20) && DTLSTransport.isDTLS(firstByte: 63))
        #expect(!DTLSTransport.isDTLS(firstByte: 0) && !DTLSTransport.isDTLS(firstByte: 128) && !DTLSTransport.isDTLS(firstByte: 64))
    }
}

/// The transport keeps the one sans-IO contract (`SansIO` in CastCore): the shared check, then
/// what it does not look at (which records, and the server's last flight before it connects).
@Suite struct DTLSTransportContractTests {
    /// A record by its content type and, for a handshake record, its message type: each fresh
    /// transport draws its own random, so the bytes differ from one replay to the next.
    static func kind(_ o: DTLSTransport.Output) -> String {
        guard case .transmit(let r) = o else { return "\(o)" }
        return r.count > 13 && r[0] == 22 ? "handshake \(r[13])" : "record \(r.first ?? 0)"
    }

    @Test func theSharedContractHolds() {
        let v = SansIOContract.violations({
            try! DTLSTransport(role: .client, certificate: DTLSTransportTests.certA,
                               remoteFingerprint: DTLSTransportTests.certB.fingerprint())
        }, inputs: [(.start, Instant(nanoseconds: 1_000_000_000))], same: { Self.kind($0) == Self.kind($1) })
        #expect(v.isEmpty, "\(v)")
    }

    @Test func recordsThenEventsInDecisionOrderThenOnlyTheDeadlineIsLeft() throws {
        let client = try DTLSTransport(role: .client, certificate: DTLSTransportTests.certA,
                                       remoteFingerprint: DTLSTransportTests.certB.fingerprint())
        let server = try DTLSTransport(role: .server, certificate: DTLSTransportTests.certB,
                                       remoteFingerprint: DTLSTransportTests.certA.fingerprint())
        let t0 = Instant(nanoseconds: 1_000_000_000)
        client.handle(.start, now: t0)
        guard case .transmit(let hello)? = client.poll() else { Issue.record("no ClientHello"); return }
        #expect(hello.count > 13 && hello[0] == 22 && hello[13] == 1)   // handshake record, ClientHello
        #expect(client.poll() == nil)
        let due = try #require(client.nextDeadline())                  // the flight's retransmission
        #expect(due == t0 + .seconds(1))
        client.handleTimeout(now: due)                                  // due: the ClientHello again
        guard case .transmit(let again)? = client.poll() else { Issue.record("no retransmission"); return }
        #expect(again[13] == 1)
        #expect(client.poll() == nil)
        #expect(try #require(client.nextDeadline()) > due)

        // The server's last flight (ChangeCipherSpec, Finished) is decided before it says connected.
        server.handle(.start, now: due)
        var toServer = [again], serverOutputs: [DTLSTransport.Output] = [], rounds = 0
        while !toServer.isEmpty, rounds < 10 {
            rounds += 1
            for d in toServer { server.handle(.datagram(d), now: due) }
            toServer = []
            var toClient: [[UInt8]] = []
            while let o = server.poll() {
                serverOutputs.append(o)
                if case .transmit(let d) = o { toClient.append(d) }
            }
            for d in toClient { client.handle(.datagram(d), now: due) }
            while let o = client.poll() { if case .transmit(let d) = o { toServer.append(d) } }
        }
        guard case .event(.connected)? = serverOutputs.last else { Issue.record("not connected last: \(serverOutputs)"); return }
        guard case .transmit? = serverOutputs.dropLast().last else { Issue.record("no flight before connected"); return }
        #expect(serverOutputs.filter { if case .event = $0 { true } else { false } }.count == 1)
        #expect(server.poll() == nil && server.nextDeadline() == nil)
    }
}
