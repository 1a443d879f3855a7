import CastCore
import CastOpenSSL
import SansIOContract
import Testing
@testable import CastWebRTC

/// Relay candidates in the ICE agent (RFC 8445 §5.1.2) and the routing of a peer
/// connection's TURN allocations (`TURNRelays`).
@Suite struct TURNRelaysTests {
    static let base = SocketAddress("10.1.0.2:40000")!
    static let server = TURNServer(address: SocketAddress("198.51.100.1:3478")!, transport: .udp,
                                   name: "turn:198.51.100.1:3478", username: "u", password: "p")
    static let relayed = SocketAddress("198.51.100.1:49160")!
    static let mapped = SocketAddress("203.0.113.2:61000")!
    static let peer = SocketAddress("203.0.113.6:50000")!

    @Test func relayCandidatesRankBelowHostAndByTransportToTheServer() {
        var agent = ICEAgent(config: ICEConfig(localUfrag: "castd", localPwd: "castdPasswordIsLongEnough", tieBreaker: 1))
        agent.handle(.hostCandidate(Self.base), now: .zero)
        for (i, t) in [TURNTransport.tls, .tcp, .udp].enumerated() {
            agent.handle(.relayCandidate(.init(relayed: SocketAddress(Self.relayed.ip, 49160 + UInt16(i)), mapped: Self.mapped, server: Self.server.address, transport: t, serverIndex: 0)), now: .zero)
        }
        let cands = agent.localCandidates.map(\.candidate)
        let host = cands.first { $0.type == .host }!
        let relays = cands.filter { $0.type == .relay }
        #expect(relays.count == 3)
        // Type preference 0 (RFC 8445 §5.1.2.2): the top byte of the priority.
        #expect(relays.allSatisfy { $0.priority >> 24 == 0 && $0.priority < host.priority })
        let byPort = Dictionary(uniqueKeysWithValues: relays.map { ($0.port, $0.priority) })
        #expect(byPort[49162]! > byPort[49161]!)   // UDP over TCP
        #expect(byPort[49161]! > byPort[49160]!)   // TCP over TLS
        // raddr/rport name the mapped address (RFC 8839 §5.1).
        #expect(relays[0].attributeValue.contains("typ relay raddr 203.0.113.2 rport 61000"))
    }

    @Test func checksFromARelayCandidateLeaveFromTheRelayedAddress() {
        var agent = ICEAgent(config: ICEConfig(localUfrag: "castd", localPwd: "castdPasswordIsLongEnough", tieBreaker: 1))
        agent.handle(.relayCandidate(.init(relayed: Self.relayed, mapped: Self.mapped, server: Self.server.address, transport: .udp, serverIndex: 0)), now: .zero)
        agent.handle(.remoteCredentials(ufrag: "peer", pwd: "peerPasswordIsLongEnough22"), now: .zero)
        let remote = ICECandidate(foundation: "1", priority: 100, address: .ip(Self.peer.ip), port: Self.peer.port, type: .srflx)
        agent.handle(.remoteCandidate(remote), now: .zero)
        agent.handleTimeout(now: .zero + .milliseconds(100))
        var sent: [ICETransmit] = []
        sent += agent.drain().transmits
        #expect(!sent.isEmpty)
        #expect(sent.allSatisfy { $0.from == Self.relayed && $0.to == Self.peer })
    }

    private func drain(_ r: inout TURNRelays) -> [TURNRelays.Output] {
        var out: [TURNRelays.Output] = []
        while true {
            guard let o = r.poll() else { return out }
            out.append(o)
        }
    }

    private func request(in outputs: [TURNRelays.Output]) throws -> StunMessage {
        for case .transmit(let t) in outputs.reversed() { return try StunMessage(decoding: t.bytes) }
        throw CastError(.malformed, "no transmit")
    }

    @Test func relaysAllocateFromTheBaseRouteDataAndFinishGathering() throws {
        var r = TURNRelays(servers: [Self.server])
        r.handle(.addBase(SocketAddress("127.0.0.1:5000")!), now: .zero)   // loopback: no allocation
        r.handle(.addBase(Self.base), now: .zero)
        r.handle(.endOfBases, now: .zero)
        var out = drain(&r)
        guard case .transmit(let first)? = out.first else { Issue.record("no Allocate"); return }
        #expect(first.from == Self.base && first.to == Self.server.address)
        #expect(r.gathering)
        let req = try StunMessage(decoding: first.bytes)
        let key = Digest.md5(Array("u:castd.test:p".utf8))
        let challenge = StunMessage(method: req.method, class: .errorResponse, transactionID: req.transactionID,
                                    attributes: [.errorCode(code: 401, reason: "Unauthorized"), .realm("castd.test"), .nonce([1, 2])]).encode()
        // A Binding response from the same server belongs to ICE's srflx gathering, not TURN.
        let binding = StunMessage(class: .successResponse, transactionID: req.transactionID, attributes: []).encode()
        #expect(!r.claims(binding, from: Self.server.address, to: Self.base))
        #expect(r.claims(challenge, from: Self.server.address, to: Self.base))
        #expect(!r.claims(challenge, from: Self.server.address, to: SocketAddress("10.9.9.9:1")!))
        r.handle(.datagram(challenge, from: Self.server.address, to: Self.base), now: .zero)
        let auth = try request(in: drain(&r))
        let ok = StunMessage(method: auth.method, class: .successResponse, transactionID: auth.transactionID,
                             attributes: [.xorRelayedAddress(Self.relayed), .xorMappedAddress(Self.mapped), .lifetime(600)])
            .encode(integrityKey: key)
        r.handle(.datagram(ok, from: Self.server.address, to: Self.base), now: .zero)
        out = drain(&r)
        #expect(out == [.allocated(server: Self.server, index: 0, relayed: Self.relayed, mapped: Self.mapped), .gatheringFinished])
        #expect(r.isRelayed(Self.relayed))
        #expect(!r.gathering)

        // What ICE sends from the relayed address goes to the server as a Send indication
        // (after the CreatePermission the first datagram to a new address triggers).
        r.handle(.send([0xAB], from: Self.relayed, to: Self.peer), now: .zero)
        out = drain(&r)
        let msgs = try out.compactMap { o -> StunMessage? in
            guard case .transmit(let t) = o else { return nil }
            #expect(t.from == Self.base && t.to == Self.server.address)
            return try StunMessage(decoding: t.bytes)
        }
        #expect(msgs.map(\.method) == [StunMessage.createPermissionMethod, StunMessage.sendMethod])
        #expect(msgs[1].dataValue == [0xAB])

        // What a peer sends to the relayed address comes back as data to it.
        let ind = StunMessage(method: StunMessage.dataMethod, class: .indication, transactionID: .random(),
                              attributes: [.xorPeerAddress(Self.peer), .data([0xCD])]).encode()
        let perm = msgs[0]
        r.handle(.datagram(StunMessage(method: perm.method, class: .successResponse, transactionID: perm.transactionID).encode(integrityKey: key),
                           from: Self.server.address, to: Self.base), now: .zero)
        r.handle(.datagram(ind, from: Self.server.address, to: Self.base), now: .zero)
        #expect(drain(&r) == [.data(from: Self.peer, to: Self.relayed, [0xCD])])

        // The allocation is lost (437 to a refresh): what ICE still sends from the relayed
        // address is dropped, never sent from the host socket instead.
        r.handleTimeout(now: .zero + .seconds(540))
        // (The permission is refreshed then too; the allocation's Refresh is among the requests.)
        let requests = try drain(&r).compactMap { o -> StunMessage? in
            if case .transmit(let t) = o { return try StunMessage(decoding: t.bytes) } else { return nil }
        }
        let refresh = try #require(requests.first { $0.method == StunMessage.refreshMethod })
        r.handle(.datagram(StunMessage(method: refresh.method, class: .errorResponse, transactionID: refresh.transactionID,
                                       attributes: [.errorCode(code: 437, reason: "Allocation Mismatch")]).encode(integrityKey: key),
                           from: Self.server.address, to: Self.base), now: .zero + .seconds(540))
        guard case .failed(_, let e)? = drain(&r).first else { Issue.record("no failure"); return }
        #expect(e.code == .turnAllocationMismatch)
        #expect(r.isRelayed(Self.relayed))
        r.handle(.send([0xEF], from: Self.relayed, to: Self.peer), now: .zero + .seconds(541))
        #expect(drain(&r).isEmpty)
    }

    @Test func gatheringFinishesAtOnceWithoutTurnServersAndAfterAFailure() throws {
        var none = TURNRelays(servers: [])
        none.handle(.addBase(Self.base), now: .zero)
        none.handle(.endOfBases, now: .zero)
        #expect(drain(&none) == [.gatheringFinished])

        var r = TURNRelays(servers: [Self.server])
        r.handle(.addBase(Self.base), now: .zero)
        r.handle(.endOfBases, now: .zero)
        _ = drain(&r)
        // No answer at all: after RFC 8489's 39.5 s the allocation fails and gathering ends.
        var now = Instant.zero
        var outs: [TURNRelays.Output] = []
        while let d = r.nextDeadline(), d - .zero <= .seconds(60) {
            now = d
            r.handleTimeout(now: now)
            outs += drain(&r)
        }
        #expect(now == .zero + .milliseconds(39_500))
        #expect(outs.last == .gatheringFinished)
        guard case .failed(let s, let e) = outs[outs.count - 2] else { Issue.record("no failure: \(outs)"); return }
        #expect(s == Self.server)
        #expect(e.code == .turnTimeout)
    }
}

/// The relays keep the one sans-IO contract (`SansIO` in CastCore): the shared check, then
/// which requests go out in which order.
@Suite struct TURNRelaysContractTests {
    static let second = TURNServer(address: SocketAddress("198.51.100.9:3478")!, transport: .udp,
                                   name: "turn:198.51.100.9:3478", username: "u", password: "p")

    @Test func theSharedContractHolds() {
        // Each fresh client draws its own transaction ids: requests compare by addresses and method.
        func kind(_ o: TURNRelays.Output) -> String {
            if case .transmit(let t) = o { return transmitKind(t) }
            return "\(o)"
        }
        let v = SansIOContract.violations({ TURNRelays(servers: [TURNRelaysTests.server, Self.second]) }, inputs: [
            (.addBase(TURNRelaysTests.base), .zero),
            (.endOfBases, .zero),
        ], same: { kind($0) == kind($1) })
        #expect(v.isEmpty, "\(v)")
    }

    @Test func outputsComeInDecisionOrderThenOnlyTheDeadlineIsLeft() throws {
        var r = TURNRelays(servers: [TURNRelaysTests.server, Self.second])
        r.handle(.addBase(TURNRelaysTests.base), now: .zero)
        // One Allocate per server, in the servers' order (the order they were decided in).
        guard case .transmit(let a)? = r.poll(), case .transmit(let b)? = r.poll() else { Issue.record("no Allocates"); return }
        #expect(a.to == TURNRelaysTests.server.address && b.to == Self.second.address)
        #expect(try StunMessage(decoding: a.bytes).method == StunMessage.allocateMethod)
        #expect(r.poll() == nil && r.poll() == nil)
        // endOfBases while both are still allocating: nothing to say yet.
        r.handle(.endOfBases, now: .zero)
        #expect(r.poll() == nil)
        let due = try #require(r.nextDeadline())   // the Allocates' retransmission (RFC 8489 §6.2.1)
        r.handleTimeout(now: due)                      // due: both requests again, in the same order
        #expect(r.poll() == .transmit(a))
        #expect(r.poll() == .transmit(b))
        #expect(r.poll() == nil)
        #expect(try #require(r.nextDeadline()) > due)
    }
}
