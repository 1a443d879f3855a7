import CastCore
import SansIOContract
import Testing
@testable import CastWebRTC

/// A small controlled ICE agent (the receiver's role) for tests: it answers checks,
/// records nominations, and can send its own checks.
struct ControlledPeer {
    var ufrag = "peer"
    var pwd = "peerPasswordIsLongEnough22"
    var remoteUfrag = "castd"
    var remotePwd = "castdPasswordIsLongEnough"
    var addresses: [SocketAddress]
    var tieBreaker: UInt64 = 1
    var answering = true
    var nominated: (local: SocketAddress, remote: SocketAddress)?
    var requests: [(msg: StunMessage, from: SocketAddress, to: SocketAddress)] = []
    var responses: [StunMessage] = []
    var outbox: [ICETransmit] = []

    mutating func handle(_ t: ICETransmit) {
        guard let m = try? StunMessage(decoding: t.datagram) else { return }
        switch m.messageClass {
        case .request:
            requests.append((m, t.from, t.to))
            guard answering, m.username == "\(ufrag):\(remoteUfrag)", m.verifyIntegrity(key: Array(pwd.utf8)) else { return }
            if m.useCandidate { nominated = (t.to, t.from) }
            let r = StunMessage(class: .successResponse, transactionID: m.transactionID,
                                attributes: [.xorMappedAddress(t.from)])
                .encode(integrityKey: Array(pwd.utf8), fingerprint: true)
            outbox.append(ICETransmit(from: t.to, to: t.from, datagram: r))
        default:
            responses.append(m)
        }
    }

    mutating func sendCheck(from: SocketAddress, to: SocketAddress, priority: UInt32 = 1_862_270_975,
                            controlling: UInt64? = nil, tid: StunTransactionID = .random(),
                            key: [UInt8]? = nil) {
        var attrs: [StunAttribute] = [.username("\(remoteUfrag):\(ufrag)"), .priority(priority)]
        attrs.append(controlling.map { .iceControlling(tieBreaker: $0) } ?? .iceControlled(tieBreaker: tieBreaker))
        let b = StunMessage(class: .request, transactionID: tid, attributes: attrs)
            .encode(integrityKey: key ?? Array(remotePwd.utf8), fingerprint: true)
        outbox.append(ICETransmit(from: from, to: to, datagram: b))
    }
}

/// Drives an agent and a peer over an in-memory link on a fake clock.
struct Link {
    var agent: ICEAgent
    var peer: ControlledPeer
    var clock = ManualClock()
    var sent: [(at: Instant, t: ICETransmit)] = []
    var events: [(at: Instant, e: ICEEvent)] = []
    /// Return true to drop a datagram from the agent.
    var drop: (Int, ICETransmit) -> Bool = { _, _ in false }
    var stunServer: ((ICETransmit) -> ICETransmit?)?

    init(agent: ICEAgent, peer: ControlledPeer) {
        self.agent = agent
        self.peer = peer
    }

    var now: Instant { clock.now() }

    mutating func flush() {
        var progress = true
        while progress {
            progress = false
            while let o = agent.poll() {
                guard case .transmit(let t) = o else {
                    if case .event(let e) = o { events.append((now, e)) }
                    continue
                }
                progress = true
                sent.append((now, t))
                if drop(sent.count - 1, t) { continue }
                if let server = stunServer, let r = server(t) {
                    agent.handle(.datagram(r.datagram, from: r.from, to: r.to), now: now)
                } else if peer.addresses.contains(t.to) {
                    peer.handle(t)
                }
            }
            while !peer.outbox.isEmpty {
                progress = true
                let t = peer.outbox.removeFirst()
                agent.handle(.datagram(t.datagram, from: t.from, to: t.to), now: now)
            }
            // Like the real owner: a deadline that is already due is served at once.
            if let d = agent.nextDeadline(), d <= now {
                agent.handleTimeout(now: now)
                progress = true
            }
        }
    }

    /// Runs timers until `until` (inclusive) or `stop` holds.
    mutating func run(until: Instant, stop: (Link) -> Bool = { _ in false }) {
        flush()
        while !stop(self), let d = agent.nextDeadline(), d <= until {
            if d > now { clock.set(d) }
            agent.handleTimeout(now: now)
            flush()
        }
        if !stop(self), now < until { clock.set(until) }
    }

    var states: [ICEConnectionState] {
        events.compactMap { if case .stateChanged(let s) = $0.e { return s } else { return nil } }
    }
}

extension ICEAgent {
    /// Drains every output: the datagrams and the events, each in its order.
    mutating func drain() -> (transmits: [ICETransmit], events: [ICEEvent]) {
        var t: [ICETransmit] = [], e: [ICEEvent] = []
        while let o = poll() {
            switch o {
            case .transmit(let x): t.append(x)
            case .event(let x): e.append(x)
            }
        }
        return (t, e)
    }

    /// What PeerSession does with a signalled candidate: asks `admission(of:)`, then hands it in.
    mutating func admitThenHandle(_ c: ICECandidate, now: Instant) -> RemoteCandidateOutcome {
        let outcome = admission(of: c)
        handle(.remoteCandidate(c), now: now)
        return outcome
    }
}

@Suite struct ICEAgentTests {
    static let v4 = SocketAddress("192.0.2.10:5000")!
    static let v6 = SocketAddress("[fd00::10]:5002")!
    static let peer4 = SocketAddress("192.0.2.2:53694")!
    static let peer6 = SocketAddress("[fd00::2]:49497")!
    static let peerCands = [
        try! ICECandidate(parsing: "candidate:1945708452 1 udp 2113937151 192.0.2.2 53694 typ host generation 0 ufrag peer network-cost 999"),
        try! ICECandidate(parsing: "candidate:1955285780 1 udp 2113942271 fd00::2 49497 typ host generation 0 ufrag peer network-cost 999"),
    ]

    static func config() -> ICEConfig {
        ICEConfig(localUfrag: "castd", localPwd: "castdPasswordIsLongEnough", tieBreaker: 0x1234_5678_9abc_def0)
    }

    static func link(hosts: [SocketAddress] = [v4, v6], remote: [ICECandidate] = peerCands,
                     config: ICEConfig = config()) -> Link {
        var a = ICEAgent(config: config)
        for h in hosts { a.handle(.hostCandidate(h), now: .zero) }
        a.handle(.endOfLocalCandidates, now: .zero)
        a.handle(.remoteCredentials(ufrag: "peer", pwd: "peerPasswordIsLongEnough22"), now: .zero)
        for c in remote { a.handle(.remoteCandidate(c), now: .zero) }
        return Link(agent: a, peer: ControlledPeer(addresses: [peer4, peer6]))
    }

    @Test func hostCandidatesArePrioritizedIPv6First() {
        var a = ICEAgent(config: Self.config())
        a.handle(.hostCandidate(Self.v4), now: .zero)
        a.handle(.hostCandidate(Self.v6), now: .zero)
        a.handle(.hostCandidate(SocketAddress("198.51.100.3:5004")!), now: .zero)
        #expect(a.localCandidates.map(\.candidate.priority) == [2_122_317_823, 2_130_706_431, 2_122_317_567])
        var cands: [ICECandidate] = []
        for e in a.drain().events { if case .localCandidate(let c) = e { cands.append(c) } }
        #expect(cands.count == 3)
        #expect(cands[1].attributeValue.hasSuffix(" 2130706431 fd00::10 5002 typ host generation 0 ufrag castd"))
        // Same type and base ⇒ same foundation; different base ⇒ different.
        #expect(cands[0].foundation != cands[2].foundation)
        #expect(ICEAgent.foundation(.host, Self.v4.ip, server: nil) == cands[0].foundation)
    }

    @Test func checklistIsOrderedByRFC8445PairPriority() {
        let l = Self.link()
        #expect(l.agent.pairs.count == 2)   // v4×v4 and v6×v6 only
        #expect(l.agent.pairs[0].local == Self.v6 && l.agent.pairs[0].remote == Self.peer6)
        #expect(l.agent.pairs[0].priority(weAreControlling: true) == 9_079_312_923_838_382_079)
        #expect(l.agent.pairs[1].priority(weAreControlling: true) == 9_079_290_933_589_049_343)
        #expect(CandidatePair.priority(controlling: 10, controlled: 20) == (10 << 32) + 40)
        #expect(CandidatePair.priority(controlling: 20, controlled: 10) == (10 << 32) + 41)
        #expect(l.agent.state == .checking)
    }

    @Test func firstCheckCarriesCredentialsAndIsPacedByTa() throws {
        var l = Self.link()
        l.peer.answering = false
        l.flush()
        #expect(l.sent.count == 1)
        let t = l.sent[0].t
        #expect(t.from == Self.v6 && t.to == Self.peer6)
        let m = try StunMessage(decoding: t.datagram)
        #expect(m.messageClass == .request)
        #expect(m.username == "peer:castd")
        #expect(m.priority == 1_862_270_975)   // prflx type preference, same local preference (§7.1.1)
        #expect(m.iceControlling == 0x1234_5678_9abc_def0)
        #expect(!m.useCandidate)
        #expect(m.hasValidFingerprint)
        #expect(m.verifyIntegrity(key: Array("peerPasswordIsLongEnough22".utf8)))
        #expect(l.agent.nextDeadline() == Instant(nanoseconds: 50_000_000))
        l.run(until: Instant(nanoseconds: 50_000_000))
        #expect(l.sent.count == 2)
        #expect(l.sent[1].t.to == Self.peer4)
        #expect(l.sent[1].at == Instant(nanoseconds: 50_000_000))
    }

    @Test func twoAgentsConnectAndTheBestPairIsNominated() throws {
        var l = Self.link()
        l.run(until: .zero + .seconds(2), stop: { $0.agent.state == .connected })
        #expect(l.agent.state == .connected)
        #expect(l.states == [.checking, .connected])
        let sel = try #require(l.agent.selectedPair)
        #expect(sel.local == Self.v6 && sel.remote == Self.peer6)
        #expect(l.peer.nominated?.local == Self.peer6)
        #expect(l.peer.nominated?.remote == Self.v6)
        #expect(l.events.contains { $0.e == .selectedPair(local: Self.v6, remote: Self.peer6) })
        // Exactly one request carried USE-CANDIDATE, and only after that pair had succeeded.
        let nominations = l.peer.requests.filter { $0.msg.useCandidate }
        #expect(nominations.count == 1)
        // The best pair succeeded first, so it is nominated on the next Ta tick without
        // waiting for nominationDelay, and the lower pair is never checked (§8.1.2).
        #expect(l.now == .zero + .milliseconds(50))
        #expect(l.agent.pairs.map(\.state) == [.succeeded, .waiting])
    }

    @Test func lostChecksAreRetransmittedWithDoublingRTO() throws {
        var l = Self.link(hosts: [Self.v4], remote: [Self.peerCands[0]])
        l.drop = { i, _ in i < 3 }   // the first three transmissions are lost
        l.run(until: .zero + .seconds(5), stop: { $0.agent.state == .connected })
        #expect(l.agent.state == .connected)
        let times = l.sent.prefix(4).map { $0.at.nanoseconds / 1_000_000 }
        #expect(times == [0, 250, 750, 1750])   // RTO 250 ms, doubled (RFC 8489 §6.2.1)
        // The retransmissions are byte-identical (same transaction).
        #expect(l.sent[1].t.datagram == l.sent[0].t.datagram)
        #expect(l.sent[3].t.datagram == l.sent[0].t.datagram)
    }

    @Test func checkingFailsAfterEveryTransmissionTimesOut() {
        var l = Self.link(hosts: [Self.v4], remote: [Self.peerCands[0]])
        l.peer.answering = false
        l.agent.handle(.endOfRemoteCandidates, now: .zero)
        l.run(until: .zero + .milliseconds(12_749))
        #expect(l.agent.state == .checking)
        #expect(l.sent.count == 7)   // Rc = 7
        l.run(until: .zero + .seconds(20))
        #expect(l.agent.state == .failed)
        #expect(l.states == [.checking, .failed])
        #expect(l.events.last?.at == .zero + .milliseconds(12_750))
        #expect(l.agent.nextDeadline() == nil)
    }

    @Test func withoutEndOfCandidatesFailureWaitsForTheCheckingTimeout() {
        var l = Self.link(hosts: [Self.v4], remote: [Self.peerCands[0]])
        l.peer.answering = false
        l.run(until: .zero + .seconds(29))
        #expect(l.agent.state == .checking)
        l.run(until: .zero + .seconds(31))
        #expect(l.agent.state == .failed)
    }

    @Test func incomingCheckFromAnUnknownAddressTriggersACheckToIt() throws {
        // No remote candidates signalled yet: Chrome's check arrives first (mDNS-hidden host).
        var l = Self.link(hosts: [Self.v4], remote: [])
        #expect(l.agent.state == .new)
        let prflx = SocketAddress("192.0.2.2:40000")!
        l.peer.addresses.append(prflx)
        l.peer.sendCheck(from: prflx, to: Self.v4, priority: 1_853_824_767)
        l.run(until: .zero)
        // 1. the success response, with the source as XOR-MAPPED-ADDRESS
        let resp = try StunMessage(decoding: l.sent[0].t.datagram)
        #expect(resp.messageClass == .successResponse)
        #expect(resp.xorMappedAddress == prflx)
        #expect(resp.verifyIntegrity(key: Array("castdPasswordIsLongEnough".utf8)))
        #expect(l.sent[0].t.to == prflx && l.sent[0].t.from == Self.v4)
        // 2. a peer-reflexive remote candidate with the request's PRIORITY
        #expect(l.agent.remoteCandidates.count == 1)
        #expect(l.agent.remoteCandidates[0].type == .prflx)
        #expect(l.agent.remoteCandidates[0].priority == 1_853_824_767)
        // 3. the triggered check to it, right away
        #expect(l.sent.count == 2)
        #expect(l.sent[1].t.to == prflx)
        #expect(try StunMessage(decoding: l.sent[1].t.datagram).messageClass == .request)
        l.run(until: .zero + .seconds(2), stop: { $0.agent.state == .connected })
        #expect(l.agent.selectedPair?.remote == prflx)
        // When the same address is signalled later, it replaces the prflx candidate.
        l.agent.handle(.remoteCandidate(try ICECandidate(parsing: "candidate:9 1 udp 2113937151 192.0.2.2 40000 typ host ufrag peer")), now: l.now)
        #expect(l.agent.remoteCandidates.map(\.type) == [.host])
    }

    /// Seen against aiortc with castd on loopback and 10.99.0.1: the receiver's first check
    /// reached castd's loopback socket (no pair can join a loopback and a non-loopback
    /// address), its second the 10.99.0.1 one; the second must still form and check the pair.
    @Test func aKnownPeerReflexiveSourceIsPairedWithTheSocketItsNextCheckReaches() throws {
        let lo = SocketAddress("127.0.0.1:5004")!
        var l = Self.link(hosts: [lo, Self.v4], remote: [])
        let prflx = SocketAddress("192.0.2.2:40000")!
        l.peer.addresses.append(prflx)
        l.peer.sendCheck(from: prflx, to: lo)
        l.run(until: .zero)
        #expect(l.agent.remoteCandidates.map(\.type) == [.prflx])
        #expect(l.agent.pairs.isEmpty)
        l.peer.sendCheck(from: prflx, to: Self.v4)
        l.run(until: .zero + .seconds(2), stop: { $0.agent.state == .connected })
        #expect(l.agent.pairs.count == 1)
        #expect(l.agent.selectedPair?.local == Self.v4)
        #expect(l.agent.selectedPair?.remote == prflx)
    }

    /// The same, when the name behind it resolves (mDNS) after the unpairable check: the host
    /// candidate that replaces the prflx one is paired with every socket it can be.
    @Test func aResolvedHostCandidateReplacingAnUnpairedPrflxOneIsChecked() throws {
        let lo = SocketAddress("127.0.0.1:5004")!
        var l = Self.link(hosts: [lo, Self.v4], remote: [])
        let hidden = try ICECandidate(parsing: "candidate:1 1 udp 2113937151 87c85f0a-3708-455f-894d-a0a402bf58a9.local 53694 typ host ufrag peer")
        l.agent.handle(.remoteCandidate(hidden), now: .zero)
        l.peer.sendCheck(from: Self.peer4, to: lo)
        l.run(until: .zero)
        #expect(l.agent.pairs.isEmpty)
        l.agent.handle(.resolved(hostname: "87c85f0a-3708-455f-894d-a0a402bf58a9.local", addresses: [Self.peer4.ip]), now: l.now)
        #expect(l.agent.remoteCandidates.map(\.type) == [.host])
        #expect(l.agent.pairs.count == 1)
        l.run(until: .zero + .seconds(2), stop: { $0.agent.state == .connected })
        #expect(l.agent.selectedPair?.remote == Self.peer4)
    }

    @Test func consentIsRefreshedAndLostAfterThirtySeconds() throws {
        var l = Self.link(hosts: [Self.v4], remote: [Self.peerCands[0]])
        l.run(until: .zero + .seconds(1), stop: { $0.agent.state == .connected })
        let connectedAt = l.now
        #expect(l.agent.state == .connected)
        let before = l.sent.count
        l.run(until: connectedAt + .seconds(60), stop: { $0.now >= connectedAt + .seconds(20) })
        // Consent checks every 4–6 s (RFC 7675 §5.1), answered: still connected.
        let consents = l.sent[before...].map(\.at)
        #expect(consents.count >= 3 && consents.count <= 5)
        for (a, b) in zip(consents, consents.dropFirst()) {
            #expect(b - a >= .seconds(4) && b - a <= .seconds(6))
        }
        #expect(l.agent.state == .connected)
        // The receiver vanishes.
        l.peer.answering = false
        // Consent was last granted by the answer to the last check sent before it vanished.
        let lastAnswered = l.sent.last!.at
        l.run(until: lastAnswered + .seconds(40))
        #expect(l.states == [.checking, .connected, .disconnected, .failed])
        let disc = try #require(l.events.first { $0.e == .stateChanged(.disconnected) }?.at)
        let fail = try #require(l.events.first { $0.e == .stateChanged(.failed) }?.at)
        #expect(disc - lastAnswered == .seconds(7))
        #expect(fail - lastAnswered == .seconds(30))
        #expect(l.agent.nextDeadline() == nil)
    }

    @Test func disconnectedRecoversWhenConsentReturns() {
        var l = Self.link(hosts: [Self.v4], remote: [Self.peerCands[0]])
        l.run(until: .zero + .seconds(1), stop: { $0.agent.state == .connected })
        l.peer.answering = false
        l.run(until: .zero + .seconds(60), stop: { $0.agent.state == .disconnected })
        #expect(l.agent.state == .disconnected)
        l.peer.answering = true
        l.run(until: l.now + .seconds(10), stop: { $0.agent.state == .connected })
        #expect(l.states == [.checking, .connected, .disconnected, .connected])
    }

    @Test func whileDisconnectedConsentIsProbedOftenSoThePathsReturnIsNoticedQuickly() {
        // Found by Scripts/faults (link cut 4 s): with a check every ~5 s the cast stayed
        // frozen up to 5 s after the link came back.
        for ms in [300, 1100, 2300, 3700, 4900, 6100, 8300] {   // the path returns at any phase of the probing
            var l = Self.link(hosts: [Self.v4], remote: [Self.peerCands[0]])
            l.run(until: .zero + .seconds(1), stop: { $0.agent.state == .connected })
            l.peer.answering = false
            l.run(until: .zero + .seconds(60), stop: { $0.agent.state == .disconnected })
            l.run(until: l.now + .milliseconds(ms))
            l.peer.answering = true
            let back = l.now
            l.run(until: l.now + .seconds(10), stop: { $0.agent.state == .connected })
            #expect(l.agent.state == .connected)
            #expect(l.now - back <= .milliseconds(500) + .milliseconds(50), "returned after \(ms) ms")
        }
    }

    @Test func consentResponsesWithoutValidIntegrityDoNotKeepConsent() throws {
        // issue 8 §7: an on-path forger that sees castd's consent checks (so it knows the
        // transaction ids) but not the receiver's password cannot keep media flowing.
        var l = Self.link(hosts: [Self.v4], remote: [Self.peerCands[0]])
        l.run(until: .zero + .seconds(1), stop: { $0.agent.state == .connected })
        #expect(l.agent.state == .connected)
        l.peer.answering = false
        let silentFrom = l.sent.count
        let start = l.now
        var forged = 0
        var answered = l.sent.count
        while l.now < start + .seconds(40), l.agent.state != .failed {
            l.run(until: l.now + .milliseconds(100))
            for (_, t) in l.sent[answered...] {
                guard let req = try? StunMessage(decoding: t.datagram), req.messageClass == .request else { continue }
                let wrongKey = StunMessage(class: .successResponse, transactionID: req.transactionID,
                                           attributes: [.xorMappedAddress(t.from)])
                    .encode(integrityKey: Array("notThePeersPasswordAtAll!!".utf8), fingerprint: true)
                let noIntegrity = StunMessage(class: .successResponse, transactionID: req.transactionID,
                                              attributes: [.xorMappedAddress(t.from)]).encode(fingerprint: true)
                for d in [wrongKey, noIntegrity] {
                    l.agent.handle(.datagram(d, from: t.to, to: t.from), now: l.now)
                    forged += 1
                }
            }
            answered = l.sent.count
        }
        #expect(forged >= 8)
        #expect(l.states == [.checking, .connected, .disconnected, .failed])
        // Consent was last granted just before the peer went silent; the forgeries changed nothing.
        let lastGranted = try #require(l.sent[..<silentFrom].last?.at)
        let fail = try #require(l.events.first { $0.e == .stateChanged(.failed) }?.at)
        #expect(fail - lastGranted == .seconds(30))
    }

    @Test func aCheckWithoutValidIntegrityCreatesNoPairAndNoTriggeredCheck() throws {
        var l = Self.link(hosts: [Self.v4], remote: [Self.peerCands[0]])
        l.peer.answering = false
        l.flush()
        let pairs = l.agent.pairs.count
        l.sent.removeAll()
        let stranger = SocketAddress("192.0.2.77:40000")!
        l.peer.addresses.append(stranger)
        l.peer.sendCheck(from: stranger, to: Self.v4, key: Array("wrongPasswordForThisAgent".utf8))
        let noIntegrity = StunMessage(class: .request, transactionID: .random(),
                                      attributes: [.username("castd:peer"), .priority(1), .iceControlled(tieBreaker: 1)])
            .encode(fingerprint: true)
        l.peer.outbox.append(ICETransmit(from: stranger, to: Self.v4, datagram: noIntegrity))
        l.flush()
        l.run(until: l.now + .milliseconds(500))
        #expect(l.agent.pairs.count == pairs)
        #expect(!l.agent.pairs.contains { $0.remote == stranger })
        // Nothing went to the stranger but error answers (401 or 400); no success, no check.
        let toStranger = try l.sent.filter { $0.t.to == stranger }.map { try StunMessage(decoding: $0.t.datagram) }
        #expect(!toStranger.isEmpty)
        #expect(toStranger.allSatisfy { $0.messageClass == .errorResponse })
        #expect(l.agent.state == .checking)
    }

    @Test func roleConflictWithALowerTieBreakerGets487() throws {
        var l = Self.link(hosts: [Self.v4], remote: [Self.peerCands[0]])
        l.peer.answering = false
        l.flush()
        l.sent.removeAll()
        l.peer.sendCheck(from: Self.peer4, to: Self.v4, controlling: 1)
        l.flush()
        let r = try StunMessage(decoding: l.sent[0].t.datagram)
        #expect(r.messageClass == .errorResponse)
        #expect(r.errorCode?.code == 487)
        #expect(r.verifyIntegrity(key: Array("castdPasswordIsLongEnough".utf8)))
        #expect(l.agent.controlling)
    }

    @Test func roleConflictWithAHigherTieBreakerMakesUsControlled() throws {
        var l = Self.link(hosts: [Self.v4], remote: [Self.peerCands[0]])
        l.peer.answering = false
        l.flush()
        l.sent.removeAll()
        l.peer.sendCheck(from: Self.peer4, to: Self.v4, controlling: .max)
        l.flush()
        #expect(!l.agent.controlling)
        #expect(l.events.contains { $0.e == .roleChanged(controlling: false) })
        #expect(try StunMessage(decoding: l.sent[0].t.datagram).messageClass == .successResponse)
    }

    @Test func errorResponse487SwitchesRoleAndRetries() throws {
        var l = Self.link(hosts: [Self.v4], remote: [Self.peerCands[0]])
        l.peer.answering = false
        l.flush()
        let req = try StunMessage(decoding: l.sent[0].t.datagram)
        let err = StunMessage(class: .errorResponse, transactionID: req.transactionID,
                              attributes: [.errorCode(code: 487, reason: "Role Conflict")])
            .encode(integrityKey: Array("peerPasswordIsLongEnough22".utf8), fingerprint: true)
        l.agent.handle(.datagram(err, from: Self.peer4, to: Self.v4), now: l.now)
        #expect(!l.agent.controlling)
        l.run(until: l.now + .milliseconds(50))
        let retry = try StunMessage(decoding: try #require(l.sent.last).t.datagram)
        #expect(retry.iceControlled == 0x1234_5678_9abc_def0)
        #expect(retry.iceControlling == nil)
    }

    @Test func badCredentialsAreRejectedAndJunkIsCounted() throws {
        var l = Self.link(hosts: [Self.v4], remote: [Self.peerCands[0]])
        l.peer.answering = false
        l.flush()
        l.sent.removeAll()
        l.peer.sendCheck(from: Self.peer4, to: Self.v4, key: Array("wrong".utf8))
        l.flush()
        let r = try StunMessage(decoding: l.sent[0].t.datagram)
        #expect(r.errorCode?.code == 401)
        let dropped = l.agent.droppedDatagrams
        l.agent.handle(.datagram([0, 1, 2], from: Self.peer4, to: Self.v4), now: l.now)
        // A response to a transaction we never started.
        let stray = StunMessage(class: .successResponse, transactionID: .random()).encode(fingerprint: true)
        l.agent.handle(.datagram(stray, from: Self.peer4, to: Self.v4), now: l.now)
        #expect(l.agent.droppedDatagrams == dropped + 2)
    }

    @Test func asymmetricResponseFailsThePair() throws {
        var l = Self.link(hosts: [Self.v4], remote: [Self.peerCands[0]])
        l.peer.answering = false
        l.flush()
        let req = try StunMessage(decoding: l.sent[0].t.datagram)
        let ok = StunMessage(class: .successResponse, transactionID: req.transactionID,
                             attributes: [.xorMappedAddress(Self.v4)])
            .encode(integrityKey: Array("peerPasswordIsLongEnough22".utf8), fingerprint: true)
        l.agent.handle(.datagram(ok, from: SocketAddress("192.0.2.99:1")!, to: Self.v4), now: l.now)
        #expect(l.agent.pairs[0].state == .failed)
        #expect(!l.agent.pairs[0].valid)
    }

    @Test func serverReflexiveCandidateIsGatheredFromTheStunServer() throws {
        var cfg = Self.config()
        let server = SocketAddress("198.51.100.1:3478")!
        let mapped = SocketAddress("203.0.113.7:61234")!
        cfg.stunServers = [server, SocketAddress("[2001:db8::3478]:3478")!]
        var a = ICEAgent(config: cfg)
        a.handle(.hostCandidate(Self.v4), now: .zero)
        a.handle(.endOfLocalCandidates, now: .zero)
        var l = Link(agent: a, peer: ControlledPeer(addresses: []))
        l.stunServer = { t in
            guard t.to == server, let m = try? StunMessage(decoding: t.datagram) else { return nil }
            #expect(m.attributes.count == 1)   // FINGERPRINT only: no credentials for public STUN
            let r = StunMessage(class: .successResponse, transactionID: m.transactionID,
                                attributes: [.xorMappedAddress(mapped)]).encode()
            return ICETransmit(from: server, to: t.from, datagram: r)
        }
        l.flush()
        #expect(l.sent.count == 1)   // the IPv6 server is not asked from an IPv4 base
        let cands = l.events.compactMap { if case .localCandidate(let c) = $0.e { return c } else { return nil } }
        #expect(cands.count == 2)
        #expect(cands[1].type == .srflx)
        #expect(cands[1].socketAddress == mapped)
        #expect(cands[1].relatedAddress == "192.0.2.10" && cands[1].relatedPort == 5000)
        #expect(cands[1].priority == ICECandidate.priority(type: .srflx, localPreference: 0x7FFF))
        #expect(l.events.last?.e == .gatheringComplete)
    }

    @Test func gatheringCompletesWhenTheStunServerNeverAnswers() {
        var cfg = Self.config()
        cfg.stunServers = [SocketAddress("198.51.100.1:3478")!]
        var a = ICEAgent(config: cfg)
        a.handle(.hostCandidate(Self.v4), now: .zero)
        a.handle(.endOfLocalCandidates, now: .zero)
        var l = Link(agent: a, peer: ControlledPeer(addresses: []))
        l.run(until: .zero + .seconds(12))
        #expect(!l.events.contains { $0.e == .gatheringComplete })
        l.run(until: .zero + .seconds(13))
        #expect(l.events.contains { $0.e == .gatheringComplete })
    }

    @Test func mdnsCandidatesWaitForResolution() throws {
        var l = Self.link(hosts: [Self.v4], remote: [])
        let hidden = try ICECandidate(parsing: "candidate:1411999973 1 udp 2113937151 87c85f0a-3708-455f-894d-a0a402bf58a9.local 53694 typ host generation 0 ufrag peer network-cost 999")
        l.agent.handle(.remoteCandidate(hidden), now: .zero)
        l.flush()
        #expect(l.events.contains { $0.e == .needsResolution(hostname: "87c85f0a-3708-455f-894d-a0a402bf58a9.local") })
        #expect(l.agent.pairs.isEmpty)
        l.agent.handle(.resolved(hostname: "87c85f0a-3708-455f-894d-a0a402bf58a9.local", addresses: [IPAddress("192.0.2.2")!]), now: .zero)
        #expect(l.agent.pairs.count == 1)
        l.run(until: .zero + .seconds(1), stop: { $0.agent.state == .connected })
        #expect(l.agent.selectedPair?.remote == Self.peer4)
    }

    @Test func candidatesOfAnotherGenerationAreIgnored() throws {
        var l = Self.link(hosts: [Self.v4], remote: [])
        l.agent.handle(.remoteCandidate(try ICECandidate(parsing: "candidate:1 1 udp 2113937151 192.0.2.2 53694 typ host ufrag old1")), now: .zero)
        #expect(l.agent.remoteCandidates.isEmpty)
        l.agent.handle(.remoteCandidate(try ICECandidate(parsing: "candidate:1 1 tcp 2113937151 192.0.2.2 9 typ host tcptype active")), now: .zero)
        #expect(l.agent.remoteCandidates.isEmpty)
    }

    @Test func closeStopsEverything() {
        var l = Self.link()
        l.flush()
        l.agent.handle(.close, now: l.now)
        #expect(l.agent.state == .closed)
        #expect(l.agent.nextDeadline() == nil)
        #expect(l.agent.poll() == .event(.stateChanged(.closed)))
    }
}

@Suite struct ICEAgentChecklistTests {
    @Test func pairsSharingAFoundationStartFrozenAndThawOnSuccess() throws {
        // Two remote candidates with the same foundation and our one host: the pairs share
        // the pair foundation, so only the better one starts Waiting (RFC 8445 §6.1.2.6).
        var a = ICEAgent(config: ICEAgentTests.config())
        a.handle(.hostCandidate(ICEAgentTests.v4), now: .zero)
        a.handle(.remoteCredentials(ufrag: "peer", pwd: "peerPasswordIsLongEnough22"), now: .zero)
        a.handle(.remoteCandidate(try ICECandidate(parsing: "candidate:7 1 udp 2113937151 192.0.2.2 53694 typ host")), now: .zero)
        a.handle(.remoteCandidate(try ICECandidate(parsing: "candidate:7 1 udp 2113937000 192.0.2.3 53694 typ host")), now: .zero)
        #expect(a.pairs.map(\.state) == [.waiting, .frozen])
        var l = Link(agent: a, peer: ControlledPeer(addresses: [ICEAgentTests.peer4]))
        l.flush()
        // The first check succeeded at t=0 and thawed its sibling.
        #expect(l.agent.pairs.map(\.state) == [.succeeded, .waiting])
    }

    @Test func aFrozenPairIsCheckedWhenNothingIsWaiting() throws {
        var a = ICEAgent(config: ICEAgentTests.config())
        a.handle(.hostCandidate(ICEAgentTests.v4), now: .zero)
        a.handle(.remoteCredentials(ufrag: "peer", pwd: "peerPasswordIsLongEnough22"), now: .zero)
        a.handle(.remoteCandidate(try ICECandidate(parsing: "candidate:7 1 udp 2113937151 192.0.2.2 53694 typ host")), now: .zero)
        a.handle(.remoteCandidate(try ICECandidate(parsing: "candidate:7 1 udp 2113937000 192.0.2.3 53694 typ host")), now: .zero)
        var l = Link(agent: a, peer: ControlledPeer(addresses: []))   // nobody answers
        l.run(until: .zero + .milliseconds(50))
        #expect(l.sent.map(\.t.to) == [SocketAddress("192.0.2.2:53694")!, SocketAddress("192.0.2.3:53694")!])
        #expect(l.sent.map(\.at) == [.zero, .zero + .milliseconds(50)])
    }

    @Test func asControlledTheAgentSelectsWhatThePeerNominates() throws {
        var l = ICEAgentTests.link(hosts: [ICEAgentTests.v4], remote: [ICEAgentTests.peerCands[0]])
        l.peer.answering = false
        // The peer claims the controlling role with a larger tie-breaker: we become controlled.
        l.peer.sendCheck(from: ICEAgentTests.peer4, to: ICEAgentTests.v4, controlling: .max)
        l.flush()
        #expect(!l.agent.controlling)
        l.peer.answering = true
        l.run(until: .zero + .seconds(1))
        // Our own checks succeed but we never nominate, so we stay checking …
        #expect(l.agent.state == .checking)
        #expect(l.peer.requests.allSatisfy { !$0.msg.useCandidate && $0.msg.iceControlled != nil })
        // … until the peer's check carries USE-CANDIDATE.
        let attrs: [StunAttribute] = [.username("castd:peer"), .priority(1), .iceControlling(tieBreaker: .max), .useCandidate]
        let b = StunMessage(class: .request, transactionID: .random(), attributes: attrs)
            .encode(integrityKey: Array("castdPasswordIsLongEnough".utf8), fingerprint: true)
        l.agent.handle(.datagram(b, from: ICEAgentTests.peer4, to: ICEAgentTests.v4), now: l.now)
        l.flush()
        #expect(l.agent.state == .connected)
        #expect(l.agent.selectedPair?.remote == ICEAgentTests.peer4)
    }

    @Test func remoteCandidatesAreBounded() throws {
        var l = ICEAgentTests.link(hosts: [ICEAgentTests.v4], remote: [])
        for i in 0..<200 {
            l.agent.handle(.remoteCandidate(try ICECandidate(parsing: "candidate:\(i) 1 udp 1 10.0.\(i / 250).\(i % 250 + 1) 9 typ host")), now: .zero)
            l.agent.handle(.remoteCandidate(try ICECandidate(parsing: "candidate:\(i) 1 udp 1 h\(i).local 9 typ host")), now: .zero)
        }
        #expect(l.agent.remoteCandidates.count == 64)
        #expect(l.agent.pairs.count == 64)
        l.flush()
        #expect(l.events.filter { if case .needsResolution = $0.e { return true } else { return false } }.count == 16)
    }

    @Test func candidatesBeyondTheBoundsAreReportedAsDropped() throws {
        var l = ICEAgentTests.link(hosts: [ICEAgentTests.v4], remote: [])
        var kept = 0, dropped = 0
        for i in 0..<100 {
            let ok = l.agent.admitThenHandle(try ICECandidate(parsing: "candidate:\(i) 1 udp 1 10.0.0.\(i + 1) 9 typ host"), now: .zero)
            if ok == .kept { kept += 1 } else if ok == .overBound { dropped += 1 }
        }
        #expect(kept == 64 && dropped == 36)
        // A refused address is reported as such even with the bound reached.
        #expect(l.agent.admitThenHandle(try ICECandidate(parsing: "candidate:1 1 udp 1 224.0.0.1 9 typ host"), now: .zero) == .refusedAddress)
        // Unusable candidates are skipped, not reported: that is not the bound speaking.
        #expect(l.agent.admitThenHandle(try ICECandidate(parsing: "candidate:1 1 tcp 1 10.0.0.1 9 typ host tcptype active"), now: .zero) == .skipped)
    }

    @Test func candidatesThatAreNoUnicastDestinationAreRefusedAndNeverChecked() throws {
        var l = ICEAgentTests.link(hosts: [ICEAgentTests.v4, ICEAgentTests.v6], remote: [])
        let bad = ["224.0.0.251 5353", "239.255.255.250 1900", "255.255.255.255 9", "0.0.0.0 9", "0.1.2.3 9",
                   "240.0.0.1 9", "192.0.2.9 0", ":: 9", "ff02::fb 5353", "::ffff:192.0.2.9 9"]
        for (i, a) in bad.enumerated() {
            let c = try ICECandidate(parsing: "candidate:\(i) 1 udp 2113937151 \(a) typ host")
            #expect(l.agent.admitThenHandle(c, now: .zero) == .refusedAddress, "\(a)")
        }
        // An mDNS name that resolves to a multicast address is refused the same way.
        let hidden = try ICECandidate(parsing: "candidate:20 1 udp 2113937151 trap.local 9 typ host")
        #expect(l.agent.admitThenHandle(hidden, now: .zero) == .kept)
        l.agent.handle(.resolved(hostname: "trap.local", addresses: [IPAddress("224.0.0.1")!]), now: .zero)
        #expect(l.agent.remoteCandidates.isEmpty && l.agent.pairs.isEmpty)
        l.run(until: .zero + .seconds(5))
        #expect(l.sent.isEmpty)
        // A unicast one is still taken (the documentation range counts as unicast here).
        #expect(l.agent.admitThenHandle(try ICECandidate(parsing: "candidate:30 1 udp 1 192.0.2.9 9 typ host"), now: l.now) == .kept)
    }

    @Test func oneHostnameRepeatedCannotGrowThePendingListWithoutBound() throws {
        var l = ICEAgentTests.link(hosts: [ICEAgentTests.v4], remote: [])
        var dropped = 0
        for i in 0..<1000 {
            let c = try ICECandidate(parsing: "candidate:\(i) 1 udp 1 same.local \(1000 + i) typ host")
            if l.agent.admitThenHandle(c, now: .zero) == .overBound { dropped += 1 }
        }
        #expect(dropped == 1000 - 64)
        l.agent.handle(.resolved(hostname: "same.local", addresses: [IPAddress("192.0.2.2")!]), now: .zero)
        #expect(l.agent.remoteCandidates.count == 64)
    }
}

/// The agent keeps the one sans-IO contract (`SansIO` in CastCore): the shared check, then
/// what it does not look at (which outputs, and the retransmission's deadlines).
@Suite struct ICEAgentContractTests {
    static let server = SocketAddress("198.51.100.1:3478")!

    static func agent() -> ICEAgent {
        var cfg = ICEAgentTests.config()
        cfg.stunServers = [Self.server]
        return ICEAgent(config: cfg)
    }

    @Test func theSharedContractHolds() {
        // Each fresh agent draws its own transaction ids: requests compare by addresses and method.
        func kind(_ o: ICEAgent.Output) -> String {
            if case .transmit(let t) = o { return "\(t.from) -> \(t.to): \(stunKind(t.datagram))" }
            return "\(o)"
        }
        let v = SansIOContract.violations({ Self.agent() }, inputs: [(.hostCandidate(ICEAgentTests.v4), .zero)],
                                          same: { kind($0) == kind($1) })
        #expect(v.isEmpty, "\(v)")
    }

    @Test func theCandidateThenItsRequestThenTheRequestAgainAfterEachRTO() throws {
        var a = Self.agent()
        let rto = ICEAgentTests.config().initialRTO
        a.handle(.hostCandidate(ICEAgentTests.v4), now: .zero)
        // Decided in this order: the host candidate (to trickle), then its Binding request.
        guard case .event(.localCandidate(let c)) = a.poll() else { Issue.record("no candidate first"); return }
        #expect(c.type == .host)
        guard case .transmit(let t) = a.poll() else { Issue.record("no request second"); return }
        #expect(t.from == ICEAgentTests.v4 && t.to == Self.server)
        #expect(a.poll() == nil)
        // After draining, only the deadline is left: the request's first RTO (RFC 8489 §6.2.1).
        let due = try #require(a.nextDeadline())
        #expect(due == Instant.zero + rto)
        a.handleTimeout(now: due)                         // due: the same request again
        #expect(a.drain().transmits == [t])
        #expect(a.nextDeadline() == due + rto * 2)
    }
}
