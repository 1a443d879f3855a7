import CastCore
import CastOpenSSL
import SansIOContract
import Testing
@testable import CastWebRTC

/// TURN over TCP and TLS (RFC 8656 §3.1) in `TURNRelays`, and `castd doctor --turn`'s
/// `TURNProbe`: the stream connection is the shell's; these pin what the pure side does
/// with it (allocate over it, read any slice of it, fail the relay when it closes).
@Suite struct TURNStreamRelaysTests {
    static let udpBase = SocketAddress("10.1.0.2:40000")!
    static let streamLocal = SocketAddress("10.1.0.2:51234")!
    static let udp = TURNServer(address: SocketAddress("198.51.100.1:3478")!, transport: .udp,
                                name: "turn:198.51.100.1:3478", username: "1767225600:castd", password: "s3cret-credential")
    static let tcp = TURNServer(address: SocketAddress("198.51.100.1:3478")!, transport: .tcp,
                                name: "turn:198.51.100.1:3478?transport=tcp", username: "1767225600:castd", password: "s3cret-credential")
    static let relayed = SocketAddress("198.51.100.1:49160")!
    static let peer = SocketAddress("203.0.113.6:50000")!
    static let key = Digest.md5(Array("1767225600:castd:castd.test:s3cret-credential".utf8))

    private func drain(_ r: inout TURNRelays) -> [TURNRelays.Output] {
        var out: [TURNRelays.Output] = []
        while true {
            guard let o = r.poll() else { return out }
            out.append(o)
        }
    }

    private func transmits(_ outs: [TURNRelays.Output]) -> [Transmit] {
        outs.compactMap { if case .transmit(let t) = $0 { return t } else { return nil } }
    }

    /// Answers the Allocate in `t` with 401, then the authenticated retry with success.
    private func allocate(_ r: inout TURNRelays, first: Transmit, local: SocketAddress, server: TURNServer,
                          split: Bool = false) throws -> [TURNRelays.Output] {
        let req = try StunMessage(decoding: first.bytes)
        let challenge = StunMessage(method: req.method, class: .errorResponse, transactionID: req.transactionID,
                                    attributes: [.errorCode(code: 401, reason: "Unauthorized"), .realm("castd.test"), .nonce([1, 2, 3, 4])]).encode()
        if split {
            // A stream gives slices: the second begins inside the message.
            r.handle(.datagram(Array(challenge[0..<7]), from: server.address, to: local), now: .zero)
            #expect(r.claims(Array(challenge[7...]), from: server.address, to: local))
            r.handle(.datagram(Array(challenge[7...]), from: server.address, to: local), now: .zero)
        } else {
            r.handle(.datagram(challenge, from: server.address, to: local), now: .zero)
        }
        let retry = try #require(transmits(drain(&r)).last)
        #expect(retry.from == local && retry.to == server.address)
        let auth = try StunMessage(decoding: retry.bytes)
        #expect(auth.transactionID != req.transactionID)
        let ok = StunMessage(method: auth.method, class: .successResponse, transactionID: auth.transactionID,
                             attributes: [.xorRelayedAddress(Self.relayed), .lifetime(600)]).encode(integrityKey: Self.key)
        r.handle(.datagram(ok, from: server.address, to: local), now: .zero)
        return drain(&r)
    }

    @Test func aTCPServerIsAllocatedOnOverTheShellsConnectionNotFromAHostSocket() throws {
        var r = TURNRelays(servers: [Self.tcp])
        #expect(r.streamServers.map(\.index) == [0])
        r.handle(.addBase(Self.udpBase), now: .zero)
        #expect(drain(&r).isEmpty)                       // no Allocate over UDP to a TCP server
        r.handle(.addStream(server: 0, local: Self.streamLocal), now: .zero)
        r.handle(.endOfBases, now: .zero)
        let first = try #require(transmits(drain(&r)).first)
        #expect(first.from == Self.streamLocal && first.to == Self.tcp.address)
        #expect(r.gathering)
        let out = try allocate(&r, first: first, local: Self.streamLocal, server: Self.tcp, split: true)
        #expect(out == [.allocated(server: Self.tcp, index: 0, relayed: Self.relayed, mapped: nil), .gatheringFinished])
        // Bytes on the UDP socket from the same server address are not this allocation's.
        #expect(!r.claims([0x80, 0x60, 0, 0], from: Self.tcp.address, to: Self.udpBase))
        // On the stream, a slice that starts inside a frame (an RTP byte) is still the client's.
        #expect(r.claims([0x80, 0x60, 0, 0], from: Self.tcp.address, to: Self.streamLocal))

        // The selected pair's channel: ChannelData over the stream is padded to 4 bytes (§12.5).
        r.handle(.bindChannel(relayed: Self.relayed, peer: Self.peer), now: .zero)
        let bind = try StunMessage(decoding: try #require(transmits(drain(&r)).last).bytes)
        #expect(bind.method == StunMessage.channelBindMethod)
        r.handle(.datagram(StunMessage(method: bind.method, class: .successResponse, transactionID: bind.transactionID).encode(integrityKey: Self.key),
                           from: Self.tcp.address, to: Self.streamLocal), now: .zero)
        _ = drain(&r)
        r.handle(.send([1, 2, 3, 4, 5], from: Self.relayed, to: Self.peer), now: .zero)
        let cd = try #require(transmits(drain(&r)).last)
        #expect(cd.bytes == [0x40, 0x00, 0x00, 0x05, 1, 2, 3, 4, 5, 0, 0, 0])
        #expect(cd.from == Self.streamLocal)

        // The connection drops: the relay fails with a sentence that names the server, not the credentials.
        r.handle(.streamClosed(local: Self.streamLocal, reason: "was closed by the server"), now: .zero + .seconds(5))
        let outs = drain(&r)
        guard case .failed(let s, let e)? = outs.first else { Issue.record("no failure: \(outs)"); return }
        #expect(s == Self.tcp)
        #expect(e.code == .turnConnection)
        #expect(e.message == "TURN server turn:198.51.100.1:3478?transport=tcp lost its allocation: the TCP connection was closed by the server")
        #expect(!e.message.contains("s3cret") && !e.message.contains("1767225600"))
        // What ICE still sends from that relayed address goes nowhere.
        r.handle(.send([9], from: Self.relayed, to: Self.peer), now: .zero + .seconds(6))
        #expect(drain(&r).isEmpty)
        #expect(r.nextDeadline() == nil)
    }

    @Test func aConnectionThatNeverComesUpEndsGatheringWithItsReason() {
        var r = TURNRelays(servers: [Self.udp, Self.tcp])
        r.handle(.streamFailed(server: 1, reason: "could not be opened (connect: Network is unreachable (errno 101))"), now: .zero)
        r.handle(.addBase(Self.udpBase), now: .zero)
        r.handle(.endOfBases, now: .zero)
        let outs = drain(&r)
        guard case .failed(let s, let e)? = outs.first else { Issue.record("no failure: \(outs)"); return }
        #expect(s == Self.tcp)
        #expect(e.message == "TURN server turn:198.51.100.1:3478?transport=tcp could not allocate: the TCP connection could not be opened (connect: Network is unreachable (errno 101))")
        // Nothing was sent for it; the UDP server's Allocate went from the host socket.
        #expect(transmits(outs).map(\.from) == [Self.udpBase])
        #expect(r.gathering)                             // the UDP allocation is still out
        // A connection refused while connecting: same shape, through streamClosed.
        var t = TURNRelays(servers: [Self.tcp])
        t.handle(.addStream(server: 0, local: Self.streamLocal), now: .zero)
        t.handle(.endOfBases, now: .zero)
        _ = drain(&t)
        t.handle(.streamClosed(local: Self.streamLocal, reason: "could not be made (Connection refused)"), now: .zero + .milliseconds(2))
        let o = drain(&t)
        #expect(o.count == 2 && o.last == .gatheringFinished)
    }

    /// The shell's thread polls a connection as soon as it exists, so a TLS handshake can fail
    /// (or a connect be refused) before the work that adds the connection has run; coturn
    /// answers a handshake in ~20 ms. Seen in `castd doctor --turn`: 1 run in 3 waited out the
    /// 10 s reliable timeout ("did not answer Allocate") instead of naming the certificate.
    @Test func aConnectionThatEndedBeforeItWasAddedFailsAtOnceWithItsReason() throws {
        let tls = TURNServer(address: SocketAddress("198.51.100.1:5349")!, transport: .tls,
                             name: "turns:198.51.100.1:5349", username: "1767225600:castd", password: "s3cret-credential")
        var p = TURNProbe(servers: [tls])
        let reason = "failed the TLS handshake (TLS: the certificate of 198.51.100.1 was not accepted)"
        p.handle(.socketClosed(local: Self.streamLocal, reason: reason), now: .zero)
        #expect(p.outcomes.isEmpty && !p.finished)       // not started yet: nothing to fail
        p.start(udpBases: [], streams: [(server: 0, local: Self.streamLocal)], streamFailures: [], now: .zero + .milliseconds(3))
        #expect(p.nextTransmit() == nil)                 // no Allocate into a closed connection
        #expect(p.finished)
        guard case .failed(let e, let after)? = p.outcomes[0] else { Issue.record("no outcome: \(p.outcomes)"); return }
        #expect(e.code == .turnConnection && after == .zero)
        #expect(e.message == "TURN server turns:198.51.100.1:5349 could not allocate: the TLS connection \(reason)")

        // In TURNRelays: only the connection named is failed early; another one allocates, and
        // a close for an address never added is forgotten after `earlyClosesKept` others.
        var r = TURNRelays(servers: [Self.tcp, tls])
        let other = SocketAddress("10.1.0.2:51235")!
        r.handle(.streamClosed(local: other, reason: reason), now: .zero)
        r.handle(.addStream(server: 0, local: Self.streamLocal), now: .zero)
        let first = try #require(transmits(drain(&r)).first)
        #expect(first.from == Self.streamLocal)
        for port in 0..<TURNRelays.earlyClosesKept {
            r.handle(.streamClosed(local: SocketAddress(.v4([10, 9, 0, 1]), UInt16(1000 + port)), reason: "x"), now: .zero)
        }
        r.handle(.addStream(server: 1, local: other), now: .zero)
        let outs = drain(&r)
        #expect(transmits(outs).map(\.from) == [other])    // the oldest close was dropped: it allocates
    }

    @Test func aReleaseInFlightEndsQuietlyWhenTheConnectionCloses() throws {
        var c = TURNClient(server: Self.tcp)
        c.handle(.connectionClosed(reason: "was closed by the server"), now: .zero)
        guard case .event(.failed(let e)) = c.poll() else { Issue.record("an idle client must fail"); return }
        #expect(e.message.contains("could not allocate"))

        var r = TURNRelays(servers: [Self.tcp])
        r.handle(.addStream(server: 0, local: Self.streamLocal), now: .zero)
        let first = try #require(transmits(drain(&r)).first)
        _ = try allocate(&r, first: first, local: Self.streamLocal, server: Self.tcp)
        r.handle(.close, now: .zero + .seconds(1))
        let refresh = try StunMessage(decoding: try #require(transmits(drain(&r)).last).bytes)
        #expect(refresh.method == StunMessage.refreshMethod && refresh.lifetime == 0)
        r.handle(.streamClosed(local: Self.streamLocal, reason: "was closed by the server"), now: .zero + .seconds(1))
        #expect(drain(&r).isEmpty)                       // no failure reported for a release
        #expect(r.nextDeadline() == nil)
    }

    @Test func theProbeReportsEachServerThenReleasesWhatItAllocated() throws {
        var p = TURNProbe(servers: [Self.udp, Self.tcp])
        p.start(udpBases: [Self.udpBase], streams: [(server: 1, local: Self.streamLocal)], streamFailures: [], now: .zero)
        var sent: [Transmit] = []
        while let t = p.nextTransmit() { sent.append(t) }
        #expect(Set(sent.map(\.from)) == [Self.udpBase, Self.streamLocal])
        #expect(!p.finished)
        // The TCP connection is refused.
        p.handle(.socketClosed(local: Self.streamLocal, reason: "could not be made (Connection refused)"), now: .zero + .milliseconds(1))
        #expect(!p.finished)
        // The UDP server: 401, then success 20 ms after the start.
        let req = try StunMessage(decoding: try #require(sent.first { $0.from == Self.udpBase }).bytes)
        p.handle(.datagram(StunMessage(method: req.method, class: .errorResponse, transactionID: req.transactionID,
                                       attributes: [.errorCode(code: 401, reason: "Unauthorized"), .realm("castd.test"), .nonce([7])]).encode(),
                           from: Self.udp.address, to: Self.udpBase), now: .zero + .milliseconds(10))
        let authBytes = p.nextTransmit()
        let auth = try StunMessage(decoding: try #require(authBytes).bytes)
        p.handle(.datagram(StunMessage(method: auth.method, class: .successResponse, transactionID: auth.transactionID,
                                       attributes: [.xorRelayedAddress(Self.relayed), .lifetime(600)]).encode(integrityKey: Self.key),
                           from: Self.udp.address, to: Self.udpBase), now: .zero + .milliseconds(20))
        #expect(p.finished)
        #expect(p.outcomes[0] == .allocated(relayed: Self.relayed, mapped: nil, after: .milliseconds(20)))
        guard case .failed(let e, let after)? = p.outcomes[1] else { Issue.record("no TCP outcome"); return }
        #expect(after == .milliseconds(1))
        #expect(e.message.contains("turn:198.51.100.1:3478?transport=tcp") && e.message.contains("Connection refused"))
        // The release: Refresh with LIFETIME 0 for the UDP allocation; then no timer at all.
        let releaseBytes = p.nextTransmit()
        let release = try StunMessage(decoding: try #require(releaseBytes).bytes)
        #expect(release.method == StunMessage.refreshMethod && release.lifetime == 0)
        #expect(p.nextDeadline() == nil)
    }

    /// The shared check (`TURNProbe` as a `DatagramCore`) on a probe started on a UDP and a
    /// TCP server (`start` is a named method, so `make` calls it), whose TCP connection is then
    /// refused; the deadline is the UDP Allocate's retransmission.
    @Test func theProbeKeepsTheSharedContract() {
        let v = SansIOContract.violations({
            var p = TURNProbe(servers: [Self.udp, Self.tcp])
            p.start(udpBases: [Self.udpBase], streams: [(server: 1, local: Self.streamLocal)], streamFailures: [], now: .zero)
            return p
        }, inputs: [
            (.socketClosed(local: Self.streamLocal, reason: "could not be made (Connection refused)"), .zero + .milliseconds(1)),
        ], same: { datagramOutputKind($0) == datagramOutputKind($1) })
        #expect(v.isEmpty, "\(v)")
    }

    @Test func theProbeCallsASilentServerTimedOutWithinTwelveSeconds() throws {
        var p = TURNProbe(servers: [Self.udp])
        p.start(udpBases: [Self.udpBase], streams: [], streamFailures: [], now: .zero)
        var sends = 0
        while p.nextTransmit() != nil { sends += 1 }
        var now = Instant.zero
        while !p.finished, let d = p.nextDeadline() {
            now = d
            p.handleTimeout(now: now)
            while p.nextTransmit() != nil { sends += 1 }
        }
        #expect(sends == 4)
        #expect(now == .zero + .milliseconds(11_500))
        guard case .failed(let e, _)? = p.outcomes[0] else { Issue.record("no outcome"); return }
        #expect(e.code == .turnTimeout)
    }
}

extension TURNProbe {
    /// The next datagram the probe decided (it has no events: `Event` is `Never`).
    mutating func nextTransmit() -> Transmit? {
        guard case .transmit(let t)? = poll() else { return nil }
        return t
    }
}
