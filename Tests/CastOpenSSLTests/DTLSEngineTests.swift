import Testing
import CastCore
@testable import CastOpenSSL

/// Two DTLS engines wired back to back in memory, on a clock the test moves.
struct DTLSPair {
    let client: SSLEngine
    let server: SSLEngine
    let clientCert: Certificate
    let serverCert: Certificate

    init(clientExpects: CertificateFingerprint? = nil, serverExpects: CertificateFingerprint? = nil,
         srtp: String? = "SRTP_AEAD_AES_128_GCM:SRTP_AES128_CM_SHA1_80") throws {
        clientCert = try Certificate(commonName: "client", notBeforeUnix: 1_767_225_600)
        serverCert = try Certificate(commonName: "server", notBeforeUnix: 1_767_225_600)
        client = try SSLEngine(dtls: .init(role: .client, certificate: clientCert,
                                           remoteFingerprint: clientExpects ?? serverCert.fingerprint(), srtpProfiles: srtp))
        server = try SSLEngine(dtls: .init(role: .server, certificate: serverCert,
                                           remoteFingerprint: serverExpects ?? clientCert.fingerprint(), srtpProfiles: srtp))
    }

    static func drain(_ e: SSLEngine) -> [[UInt8]] {
        var out: [[UInt8]] = []
        while let d = e.pollOutgoing() { out.append(d) }
        return out
    }

    /// Delivers everything in flight, both ways, until both are quiet. Returns the datagram count.
    @discardableResult
    func exchange(now: Instant) -> Int {
        var count = 0
        while true {
            let c = Self.drain(client), s = Self.drain(server)
            if c.isEmpty && s.isEmpty { return count }
            count += c.count + s.count
            for d in c { server.feed(d, now: now) }
            for d in s { client.feed(d, now: now) }
        }
    }
}

/// DTLS record content type of a datagram's first record (RFC 6347 §4.1).
func firstRecordType(_ d: [UInt8]) -> UInt8 { d.first ?? 0 }
/// Handshake message type of the first record, if it is a handshake record in epoch 0.
func firstHandshakeType(_ d: [UInt8]) -> UInt8? {
    guard d.count > 13, d[0] == 22, d[3] == 0, d[4] == 0 else { return nil }
    return d[13]
}

@Suite struct DTLSEngineTests {
    @Test func handshakeCompletesAndExportsEqualSRTPKeysBothWays() throws {
        let pair = try DTLSPair()
        let t0 = Instant(nanoseconds: 5_000_000_000)
        pair.client.start(now: t0)
        pair.server.start(now: t0)
        let n = pair.exchange(now: t0)
        #expect(pair.client.state == .connected)
        #expect(pair.server.state == .connected)
        #expect(n >= 4)
        // The server prefers AEAD_AES_128_GCM (RFC 7714 §14.2: 0x0007).
        #expect(pair.client.selectedSRTPProfileID == 0x0007)
        #expect(pair.server.selectedSRTPProfileID == 0x0007)
        let a = try pair.client.exportKeyingMaterial(label: "EXTRACTOR-dtls_srtp", length: 56)
        let b = try pair.server.exportKeyingMaterial(label: "EXTRACTOR-dtls_srtp", length: 56)
        #expect(a.unredacted == b.unredacted)
        #expect(a.unredacted.count == 56 && a.unredacted != [UInt8](repeating: 0, count: 56))
        #expect("\(a)" == "<redacted>")
        #expect(pair.client.peerCertificateDER == pair.serverCert.der)
        #expect(pair.server.peerCertificateDER == pair.clientCert.der)
        #expect(pair.client.nextDeadline() == nil && pair.server.nextDeadline() == nil)
    }

    @Test func applicationDataKeepsRecordBoundaries() throws {
        let pair = try DTLSPair()
        pair.client.start(now: .zero)
        pair.exchange(now: .zero)
        try pair.client.writeApplication([1, 2, 3])
        try pair.client.writeApplication([4])
        let datagrams = DTLSPair.drain(pair.client)
        #expect(datagrams.count == 2)
        #expect(datagrams.allSatisfy { $0[0] == 23 })  // application_data records
        for d in datagrams { pair.server.feed(d, now: .zero) }
        #expect(pair.server.readApplication() == [1, 2, 3])
        #expect(pair.server.readApplication() == [4])
        #expect(pair.server.readApplication() == nil)
        // Too big for one datagram: refused, and the connection stays up.
        #expect(throws: CastError.self) { try pair.client.writeApplication([UInt8](repeating: 0, count: 1200)) }
        #expect(pair.client.state == .connected)
        #expect(pair.client.pollOutgoing() == nil)
    }

    @Test func everyDatagramFitsTheMTU() throws {
        let pair = try DTLSPair()
        pair.client.start(now: .zero)
        var sizes: [Int] = []
        while true {
            let c = DTLSPair.drain(pair.client), s = DTLSPair.drain(pair.server)
            if c.isEmpty && s.isEmpty { break }
            sizes += (c + s).map(\.count)
            for d in c { pair.server.feed(d, now: .zero) }
            for d in s { pair.client.feed(d, now: .zero) }
        }
        #expect(pair.client.state == .connected)
        #expect(!sizes.isEmpty && sizes.allSatisfy { $0 <= 1200 })
    }

    @Test func retransmitsOnlyOnTheGivenClockDoublingFromOneSecond() throws {
        let pair = try DTLSPair()
        let t0 = Instant(nanoseconds: 1_000_000_000_000)
        pair.client.start(now: t0)
        let hello = DTLSPair.drain(pair.client)
        #expect(hello.count == 1)
        #expect(firstHandshakeType(hello[0]) == 1)  // client_hello
        #expect(pair.client.nextDeadline() == t0 + .seconds(1))
        // Before the deadline nothing happens, however often we ask.
        pair.client.handleTimeout(now: t0 + .milliseconds(999))
        #expect(pair.client.pollOutgoing() == nil)
        var t = t0
        var expected: [Duration] = []
        for i in 0..<6 {
            let interval = Duration.seconds(1 << i)
            t = t + interval
            expected.append(interval)
            #expect(pair.client.nextDeadline() == t)
            pair.client.handleTimeout(now: t)
            let again = DTLSPair.drain(pair.client)
            #expect(again.count == 1)
            #expect(firstHandshakeType(again.first ?? []) == 1)
            // Same handshake message, new record sequence number (bytes 5..<11).
            #expect(Array((again.first ?? []).dropFirst(13)) == Array(hello[0].dropFirst(13)))
            #expect(Array((again.first ?? [0]).prefix(11)) != Array(hello[0].prefix(11)))
        }
        // Capped at 60 s: after 1+2+4+8+16+32 s the next wait is 60 s, then give up.
        #expect(pair.client.nextDeadline() == t + .seconds(60))
        pair.client.handleTimeout(now: t + .seconds(60))
        #expect(pair.client.pollOutgoing() == nil)
        guard case .failed(let e) = pair.client.state else {
            Issue.record("expected failure, got \(pair.client.state)")
            return
        }
        #expect(e.code == .handshakeTimeout)
        #expect(pair.client.nextDeadline() == nil)
    }

    @Test func answeringAFlightDoesNotRetransmitIt() throws {
        // OpenSSL checks its own timer on every read; the engine must not
        // resend the ClientHello when the server's flight arrives late.
        let pair = try DTLSPair()
        pair.client.start(now: .zero)
        let hello = DTLSPair.drain(pair.client)
        for d in hello { pair.server.feed(d, now: Duration.milliseconds(500).asInstant) }
        let flight2 = DTLSPair.drain(pair.server)
        #expect(flight2.count >= 1)
        #expect(pair.server.nextDeadline() == Duration.milliseconds(1500).asInstant)
        for d in flight2 { pair.client.feed(d, now: Duration.milliseconds(900).asInstant) }
        let flight3 = DTLSPair.drain(pair.client)
        #expect(!flight3.isEmpty)
        #expect(flight3.allSatisfy { firstHandshakeType($0) != 1 })
        #expect(pair.client.nextDeadline() == Duration.milliseconds(1900).asInstant)
    }

    @Test func fingerprintMismatchFailsBothSidesWithoutKeys() throws {
        let wrong = CertificateFingerprint(algorithm: .sha256, bytes: [UInt8](repeating: 0xab, count: 32))
        let pair = try DTLSPair(clientExpects: wrong)
        pair.client.start(now: .zero)
        pair.exchange(now: .zero)
        guard case .failed(let c) = pair.client.state, case .failed(let s) = pair.server.state else {
            Issue.record("states \(pair.client.state) \(pair.server.state)")
            return
        }
        #expect(c.code == .fingerprintMismatch)
        #expect(c.message.contains("does not match"))
        // The server learns it from the client's bad_certificate alert.
        #expect(s.code == .handshake)
        #expect(s.message.contains("bad certificate"))
        #expect(throws: CastError.self) { try pair.client.exportKeyingMaterial(label: "EXTRACTOR-dtls_srtp", length: 56) }
        #expect(throws: CastError.self) { try pair.server.exportKeyingMaterial(label: "EXTRACTOR-dtls_srtp", length: 56) }
        #expect(throws: CastError.self) { try pair.client.writeApplication([1]) }
    }

    @Test func serverRejectsAClientWhoseCertificateIsNotTheAnnouncedOne() throws {
        let wrong = CertificateFingerprint(algorithm: .sha1, bytes: [UInt8](repeating: 1, count: 20))
        let pair = try DTLSPair(serverExpects: wrong)
        pair.client.start(now: .zero)
        pair.exchange(now: .zero)
        guard case .failed(let s) = pair.server.state, case .failed(let c) = pair.client.state else {
            Issue.record("states \(pair.client.state) \(pair.server.state)")
            return
        }
        #expect(s.code == .fingerprintMismatch)
        #expect(c.code == .handshake)
    }

    @Test func missingUseSRTPFailsTheHandshake() throws {
        let pair = try DTLSPair(srtp: nil)
        // A client that offers no use_srtp to a server that requires it.
        let server = try SSLEngine(dtls: .init(role: .server, certificate: pair.serverCert,
                                               remoteFingerprint: pair.clientCert.fingerprint()))
        pair.client.start(now: .zero)
        var rounds = 0
        while rounds < 10 {
            rounds += 1
            let c = DTLSPair.drain(pair.client), s = DTLSPair.drain(server)
            if c.isEmpty && s.isEmpty { break }
            for d in c { server.feed(d, now: .zero) }
            for d in s { pair.client.feed(d, now: .zero) }
        }
        guard case .failed(let e) = server.state else {
            Issue.record("server state \(server.state)")
            return
        }
        #expect(e.code == .handshake)
        #expect(e.message.contains("use_srtp"))
    }
}

extension Duration {
    var asInstant: Instant { Instant(nanoseconds: totalNanoseconds) }
}
