import CastCore
import CastOpenSSL
import Testing
import SansIOContract
@testable import CastWebRTC

/// The TURN client (RFC 8656) on a fake clock, against a scripted server that checks what
/// a real one checks (realm, nonce, MESSAGE-INTEGRITY with the long-term key).
@Suite struct TURNClientTests {
    static let serverAddress = SocketAddress("198.51.100.1:3478")!
    static let relayed = SocketAddress("198.51.100.1:49152")!
    static let mapped = SocketAddress("203.0.113.9:40000")!
    static let peer = SocketAddress("192.0.2.77:50000")!
    static let realm = "castd.test"
    static let password = "s3cret-credential"
    static let username = "1700000000:castd"
    static let md5Key = Digest.md5(Array("\(username):\(realm):\(password)".utf8))

    static func server(_ transport: TURNTransport = .udp, password: String = password) -> TURNServer {
        TURNServer(address: serverAddress, transport: transport, name: "turn:turn.castd.test:3478?transport=\(transport.rawValue)",
                   username: username, password: password)
    }

    /// Drives one client: collects what it sends and reports.
    struct Harness {
        var client: TURNClient
        var now = Instant.zero
        var sent: [[UInt8]] = []
        var events: [TURNEvent] = []
        var deadline: Instant?

        init(_ server: TURNServer = TURNClientTests.server(), timing: TURNTiming = TURNTiming()) {
            client = TURNClient(server: server, timing: timing)
        }

        mutating func handle(_ input: TURNInput) {
            client.handle(input, now: now)
            drain()
        }

        mutating func drain() {
            while let o = client.poll() {
                switch o {
                case .transmit(let b): sent.append(b)
                case .event(let e): events.append(e)
                }
            }
            deadline = client.nextDeadline()
        }

        /// Advance the clock to the next deadline and fire it.
        mutating func fire() {
            guard let d = deadline else { Issue.record("no deadline to fire"); return }
            now = d
            client.handleTimeout(now: now)
            drain()
        }

        mutating func lastRequest() throws -> StunMessage { try StunMessage(decoding: sent.last!) }
    }

    // MARK: Scripted server answers

    static func challenge(_ req: StunMessage, code: Int = 401, nonce: String = "nonce-1", extra: [StunAttribute] = []) -> [UInt8] {
        let reason = code == 401 ? "Unauthorized" : code == 438 ? "Stale Nonce" : "Error"
        return StunMessage(method: req.method, class: .errorResponse, transactionID: req.transactionID,
                           attributes: [.errorCode(code: code, reason: reason), .realm(realm), .nonce(Array(nonce.utf8))] + extra)
            .encode(fingerprint: true)
    }

    static func error(_ req: StunMessage, _ code: Int, _ reason: String) -> [UInt8] {
        StunMessage(method: req.method, class: .errorResponse, transactionID: req.transactionID,
                    attributes: [.errorCode(code: code, reason: reason)])
            .encode(integrityKey: md5Key, fingerprint: true)
    }

    static func success(_ req: StunMessage, _ attrs: [StunAttribute] = [], key: [UInt8] = md5Key) -> [UInt8] {
        StunMessage(method: req.method, class: .successResponse, transactionID: req.transactionID, attributes: attrs)
            .encode(integrityKey: key, fingerprint: true)
    }

    /// Start, answer the 401, answer the authenticated Allocate with `lifetime`.
    static func allocated(_ server: TURNServer = server(), lifetime: UInt32 = 600, timing: TURNTiming = TURNTiming()) throws -> Harness {
        var h = Harness(server, timing: timing)
        h.handle(.start)
        h.handle(.received(challenge(try h.lastRequest())))
        let req = try h.lastRequest()
        h.handle(.received(success(req, [.xorRelayedAddress(relayed), .xorMappedAddress(mapped), .lifetime(lifetime)])))
        return h
    }

    // MARK: Allocate and the long-term credential mechanism

    @Test func allocateAuthenticatesAfterThe401AndReportsTheRelayedAddress() throws {
        var h = Harness()
        h.handle(.start)
        let first = try h.lastRequest()
        #expect(first.method == StunMessage.allocateMethod)
        #expect(first.attributes.contains(.requestedTransport(17)))
        #expect(first.lifetime == 600)
        #expect(first.username == nil)
        #expect(!first.hasIntegrity)
        #expect(first.hasValidFingerprint)

        h.handle(.received(Self.challenge(first)))
        #expect(h.sent.count == 2)
        let second = try h.lastRequest()
        // RFC 8489 §9.2.5: a new transaction, with USERNAME, REALM, NONCE and MESSAGE-INTEGRITY.
        #expect(second.transactionID != first.transactionID)
        #expect(second.username == Self.username)
        #expect(second.realm == Self.realm)
        #expect(second.nonce == Array("nonce-1".utf8))
        #expect(second.attributes.contains(.requestedTransport(17)))
        #expect(second.verifyIntegrity(key: Self.md5Key))
        #expect(!second.verifyIntegrity(key: Digest.md5(Array("\(Self.username):\(Self.realm):wrong".utf8))))

        h.handle(.received(Self.success(second, [.xorRelayedAddress(Self.relayed), .xorMappedAddress(Self.mapped), .lifetime(600)])))
        #expect(h.events == [.allocated(relayed: Self.relayed, mapped: Self.mapped, lifetime: .seconds(600))])
        #expect(h.client.relayedAddress == Self.relayed)
        // The refresh is due at lifetime − 60 s.
        #expect(h.deadline == .zero + .seconds(540))
    }

    @Test func a401AfterTheAuthenticatedRetryFailsWithASentenceNamingTheServerAndNoSecret() throws {
        var h = Harness()
        h.handle(.start)
        h.handle(.received(Self.challenge(try h.lastRequest())))
        h.handle(.received(Self.challenge(try h.lastRequest(), nonce: "nonce-2")))
        #expect(h.sent.count == 2)
        guard case .failed(let e)? = h.events.last else { Issue.record("no failure: \(h.events)"); return }
        #expect(e.code == .turnUnauthorized)
        #expect(e.message.contains("turn:turn.castd.test:3478?transport=udp"))
        #expect(!e.message.contains(Self.password))
        #expect(!e.message.contains(Self.username))
        #expect(h.client.phase == .failed)
        #expect(h.deadline == nil)
    }

    @Test func staleNonceIsRetriedWithTheNewNonceAndBounded() throws {
        var timing = TURNTiming()
        timing.maxStaleNonceRetries = 2
        var h = Harness(timing: timing)
        h.handle(.start)
        h.handle(.received(Self.challenge(try h.lastRequest())))
        h.handle(.received(Self.challenge(try h.lastRequest(), code: 438, nonce: "nonce-2")))
        let retried = try h.lastRequest()
        #expect(h.sent.count == 3)
        #expect(retried.nonce == Array("nonce-2".utf8))
        #expect(retried.verifyIntegrity(key: Self.md5Key))
        h.handle(.received(Self.challenge(retried, code: 438, nonce: "nonce-3")))
        #expect(h.sent.count == 4)
        // The third 438 in a row is one too many.
        h.handle(.received(Self.challenge(try h.lastRequest(), code: 438, nonce: "nonce-4")))
        #expect(h.sent.count == 4)
        guard case .failed(let e)? = h.events.last else { Issue.record("no failure"); return }
        #expect(e.code == .turnRejected)
        #expect(e.message.contains("438"))
    }

    @Test func allocationMismatchAndInsufficientCapacityFailWithTheirCodes() throws {
        for (code, want) in [(437, CastError.Code.turnAllocationMismatch), (508, .turnNoCapacity), (486, .turnNoCapacity),
                             (403, .turnRejected), (442, .turnRejected)] {
            var h = Harness()
            h.handle(.start)
            h.handle(.received(Self.challenge(try h.lastRequest())))
            h.handle(.received(Self.error(try h.lastRequest(), code, "Nope")))
            guard case .failed(let e)? = h.events.last else { Issue.record("\(code): no failure"); continue }
            #expect(e.code == want, "\(code)")
            #expect(e.message.contains("turn:turn.castd.test"), "\(code)")
            #expect(e.message.contains("\(code)"), "\(code)")
        }
    }

    @Test func sha256IntegrityIsUsedWhenTheServerOffersPasswordAlgorithms() throws {
        var h = Harness()
        h.handle(.start)
        // RFC 8489 §9.2.1: the nonce cookie "obMatJos2" plus 4 characters of feature bits.
        h.handle(.received(Self.challenge(try h.lastRequest(), nonce: "obMatJos2AAABxyz",
                                          extra: [.passwordAlgorithms([.md5, .sha256])])))
        let req = try h.lastRequest()
        let key = Digest.sha256.hash(Array("\(Self.username):\(Self.realm):\(Self.password)".utf8))
        #expect(req.hasIntegritySHA256)
        #expect(!req.hasIntegrity)
        #expect(req.verifyIntegritySHA256(key: key))
        #expect(req.attributes.contains(.passwordAlgorithm(.sha256)))
        #expect(req.attributes.contains(.passwordAlgorithms([.md5, .sha256])))
        let answer = StunMessage(method: req.method, class: .successResponse, transactionID: req.transactionID,
                                 attributes: [.xorRelayedAddress(Self.relayed), .lifetime(600)])
            .encode(integrityKey: key, sha256: true, fingerprint: true)
        h.handle(.received(answer))
        #expect(h.client.relayedAddress == Self.relayed)
    }

    @Test func passwordAlgorithmsWithoutTheNonceCookieAreIgnored() throws {
        var h = Harness()
        h.handle(.start)
        h.handle(.received(Self.challenge(try h.lastRequest(), nonce: "plain-nonce", extra: [.passwordAlgorithms([.sha256])])))
        let req = try h.lastRequest()
        #expect(req.hasIntegrity)
        #expect(!req.hasIntegritySHA256)
        #expect(req.verifyIntegrity(key: Self.md5Key))
    }

    @Test func aResponseWithBadIntegrityIsDroppedAndTheRequestRetransmitted() throws {
        var h = Harness()
        h.handle(.start)
        h.handle(.received(Self.challenge(try h.lastRequest())))
        let req = try h.lastRequest()
        h.handle(.received(Self.success(req, [.xorRelayedAddress(Self.relayed)], key: Array(repeating: 1, count: 16))))
        #expect(h.events.isEmpty)
        #expect(h.client.dropped == 1)
        h.fire()
        #expect(h.sent.last == h.sent[1])
    }

    // MARK: Retransmissions

    @Test func udpRequestsFollowTheRFC8489RetransmissionScheduleThenFail() throws {
        var h = Harness()
        h.handle(.start)
        var times: [Instant] = [h.now]
        while h.client.phase == .allocating {
            let before = h.sent.count
            h.fire()
            if h.sent.count > before { times.append(h.now) }
        }
        // RFC 8489 §6.2.1 with RTO 500 ms: 0, 500, 1500, 3500, 7500, 15500, 31500 ms; fail at 39500.
        #expect(times.map { $0.nanoseconds / 1_000_000 } == [0, 500, 1500, 3500, 7500, 15500, 31500])
        #expect(h.now == .zero + .milliseconds(39_500))
        #expect(Set(h.sent).count == 1)
        guard case .failed(let e)? = h.events.last else { Issue.record("no failure"); return }
        #expect(e.code == .turnTimeout)
        #expect(e.message.contains("7 requests over UDP"))
    }

    @Test func streamRequestsAreSentOnceAndTimeOutAfterTi() throws {
        var h = Harness(Self.server(.tcp))
        h.handle(.start)
        h.fire()
        #expect(h.sent.count == 1)
        #expect(h.now == .zero + .milliseconds(39_500))
        guard case .failed(let e)? = h.events.last else { Issue.record("no failure"); return }
        #expect(e.code == .turnTimeout)
        #expect(e.message.contains("over TCP"))
    }

    // MARK: Refreshes

    @Test func theAllocationIsRefreshedOneMinuteBeforeExpiry() throws {
        var h = try Self.allocated()
        h.fire()
        #expect(h.now == .zero + .seconds(540))
        let r = try h.lastRequest()
        #expect(r.method == StunMessage.refreshMethod)
        #expect(r.username == Self.username)
        #expect(r.verifyIntegrity(key: Self.md5Key))
        h.handle(.received(Self.success(r, [.lifetime(600)])))
        #expect(h.events.last == .refreshed(lifetime: .seconds(600)))
        #expect(h.deadline == .zero + .seconds(1080))
    }

    @Test func aShortLifetimeIsRefreshedAtHalfAndAStaleNonceOnRefreshIsFollowed() throws {
        var h = try Self.allocated(lifetime: 60)
        #expect(h.deadline == .zero + .seconds(30))
        h.fire()
        h.handle(.received(Self.challenge(try h.lastRequest(), code: 438, nonce: "nonce-9")))
        let r = try h.lastRequest()
        #expect(r.method == StunMessage.refreshMethod)
        #expect(r.nonce == Array("nonce-9".utf8))
        h.handle(.received(Self.success(r, [.lifetime(60)])))
        #expect(h.events.last == .refreshed(lifetime: .seconds(60)))
        #expect(h.deadline == .zero + .seconds(60))
        // Later requests carry the new nonce.
        h.handle(.createPermission(Self.peer.ip))
        #expect(try h.lastRequest().nonce == Array("nonce-9".utf8))
    }

    @Test func aRefreshAnswered437ReportsTheAllocationLost() throws {
        var h = try Self.allocated()
        h.fire()
        h.handle(.received(Self.error(try h.lastRequest(), 437, "Allocation Mismatch")))
        guard case .failed(let e)? = h.events.last else { Issue.record("no failure"); return }
        #expect(e.code == .turnAllocationMismatch)
        #expect(e.message.contains("no longer exists"))
    }

    // MARK: Permissions, channels, data

    @Test func permissionsAreInstalledPerAddressAndRefreshedEveryFourMinutes() throws {
        var h = try Self.allocated()
        h.handle(.createPermission(Self.peer.ip))
        h.handle(.createPermission(Self.peer.ip))   // once per address
        #expect(h.sent.count == 3)
        let p = try h.lastRequest()
        #expect(p.method == StunMessage.createPermissionMethod)
        #expect(p.xorPeerAddress?.ip == Self.peer.ip)
        #expect(p.verifyIntegrity(key: Self.md5Key))
        h.handle(.received(Self.success(p)))
        #expect(h.events.last == .permissionInstalled(Self.peer.ip))
        #expect(h.deadline == .zero + .seconds(240))
        h.fire()
        let again = try h.lastRequest()
        #expect(again.method == StunMessage.createPermissionMethod)
        #expect(again.transactionID != p.transactionID)
        h.handle(.received(Self.success(again)))
        // No second "installed" event for a refresh.
        #expect(h.events.filter { $0 == .permissionInstalled(Self.peer.ip) }.count == 1)
    }

    @Test func aForbiddenPermissionIsReportedWithoutFailingTheAllocation() throws {
        var h = try Self.allocated()
        h.handle(.createPermission(Self.peer.ip))
        h.handle(.received(Self.error(try h.lastRequest(), 403, "Forbidden")))
        guard case .permissionFailed(let ip, let e)? = h.events.last else { Issue.record("no event"); return }
        #expect(ip == Self.peer.ip)
        #expect(e.code == .turnRejected)
        #expect(h.client.relayedAddress == Self.relayed)
        // A refused address is neither asked again nor sent to.
        let sent = h.sent.count
        h.handle(.createPermission(Self.peer.ip))
        h.handle(.send(to: Self.peer, [1]))
        #expect(h.sent.count == sent)
        #expect(h.client.dropped == 1)
    }

    @Test func dataGoesAsSendIndicationsUntilTheChannelIsBoundThenAsChannelData() throws {
        var h = try Self.allocated()
        h.handle(.createPermission(Self.peer.ip))
        h.handle(.received(Self.success(try h.lastRequest())))
        h.handle(.send(to: Self.peer, [1, 2, 3]))
        let ind = try h.lastRequest()
        #expect(ind.method == StunMessage.sendMethod)
        #expect(ind.messageClass == .indication)
        #expect(ind.xorPeerAddress == Self.peer)
        #expect(ind.dataValue == [1, 2, 3])
        #expect(!ind.hasIntegrity)

        h.handle(.bindChannel(peer: Self.peer))
        let bind = try h.lastRequest()
        #expect(bind.method == StunMessage.channelBindMethod)
        #expect(bind.attributes.contains(.channelNumber(0x4000)))
        #expect(bind.xorPeerAddress == Self.peer)
        #expect(bind.verifyIntegrity(key: Self.md5Key))
        // Before the binding is confirmed, still an indication.
        h.handle(.send(to: Self.peer, [4]))
        #expect(try h.lastRequest().method == StunMessage.sendMethod)
        h.handle(.received(Self.success(bind)))
        #expect(h.events.last == .channelBound(peer: Self.peer, channel: 0x4000))
        h.handle(.send(to: Self.peer, [5, 6, 7, 8, 9]))
        #expect(Hex.encode(h.sent.last!) == "400000050506070809")

        // Data from the peer either way.
        h.handle(.received(ChannelData(channel: 0x4000, data: [0xCA, 0xFE]).encode(padded: false)))
        #expect(h.events.last == .data(from: Self.peer, [0xCA, 0xFE]))
        let dataInd = StunMessage(method: StunMessage.dataMethod, class: .indication, transactionID: .random(),
                                  attributes: [.xorPeerAddress(Self.peer), .data([0xBE, 0xEF])]).encode()
        h.handle(.received(dataInd))
        #expect(h.events.last == .data(from: Self.peer, [0xBE, 0xEF]))
        // ChannelData on a channel never bound is dropped.
        let before = h.events.count
        h.handle(.received(ChannelData(channel: 0x4ABC, data: [1]).encode(padded: false)))
        #expect(h.events.count == before)
        #expect(h.client.dropped == 1)
    }

    @Test func channelsAreReboundBeforeTenMinutes() throws {
        var h = try Self.allocated(lifetime: 3600)
        h.handle(.bindChannel(peer: Self.peer))
        h.handle(.received(Self.success(try h.lastRequest())))
        // Permission refresh at 240 s comes first (the binding installed the permission).
        h.fire()
        #expect(h.now == .zero + .seconds(240))
        #expect(try h.lastRequest().method == StunMessage.createPermissionMethod)
        h.handle(.received(Self.success(try h.lastRequest())))
        h.fire()
        #expect(h.now == .zero + .seconds(480))
        h.handle(.received(Self.success(try h.lastRequest())))
        h.fire()
        #expect(h.now == .zero + .seconds(540))
        let rebind = try h.lastRequest()
        #expect(rebind.method == StunMessage.channelBindMethod)
        #expect(rebind.attributes.contains(.channelNumber(0x4000)))
    }

    @Test func dataFromAPeerWithoutPermissionIsDropped() throws {
        var h = try Self.allocated()
        let ind = StunMessage(method: StunMessage.dataMethod, class: .indication, transactionID: .random(),
                              attributes: [.xorPeerAddress(Self.peer), .data([1])]).encode()
        h.handle(.received(ind))
        #expect(h.events.count == 1)
        #expect(h.client.dropped == 1)
    }

    // MARK: The end

    @Test func closeSendsRefreshWithLifetimeZeroThenReportsClosed() throws {
        var h = try Self.allocated()
        h.handle(.close)
        let r = try h.lastRequest()
        #expect(r.method == StunMessage.refreshMethod)
        #expect(r.lifetime == 0)
        #expect(r.verifyIntegrity(key: Self.md5Key))
        h.handle(.received(Self.success(r, [.lifetime(0)])))
        #expect(h.events.last == .closed)
        #expect(h.client.phase == .closed)
        #expect(h.deadline == nil)
    }

    @Test func closeGivesUpAfterTwoTransmissionsWhenTheServerIsGone() throws {
        var h = try Self.allocated()
        h.handle(.close)
        let start = h.now
        while h.client.phase == .closing { h.fire() }
        #expect(h.sent.count == 4)   // 2 allocate + 2 final refreshes
        #expect(h.events.last == .closed)
        #expect(h.now - start == .milliseconds(500) + .milliseconds(500 * 16))
    }

    // MARK: Streams

    @Test func overTCPMessagesSplitAcrossReadsAreReassembledAndChannelDataIsPadded() throws {
        var h = Harness(Self.server(.tcp))
        h.handle(.start)
        let challenge = Self.challenge(try h.lastRequest())
        h.handle(.received(Array(challenge[0..<7])))
        #expect(h.sent.count == 1)
        h.handle(.received(Array(challenge[7...])))
        #expect(h.sent.count == 2)
        let ok = Self.success(try h.lastRequest(), [.xorRelayedAddress(Self.relayed), .lifetime(600)])
        h.handle(.received(ok))
        h.handle(.bindChannel(peer: Self.peer))
        let bound = Self.success(try h.lastRequest())
        // The answer and a padded ChannelData frame in one read.
        h.handle(.received(bound + ChannelData(channel: 0x4000, data: [1, 2, 3]).encode(padded: true)))
        #expect(h.events.suffix(2) == [.channelBound(peer: Self.peer, channel: 0x4000), .data(from: Self.peer, [1, 2, 3])])
        h.handle(.send(to: Self.peer, [9]))
        #expect(Hex.encode(h.sent.last!) == "4000000109000000")
    }

    @Test func garbageOnTheStreamFailsTheAllocation() throws {
        var h = Harness(Self.server(.tls))
        h.handle(.start)
        h.handle(.received([0x16, 0x03, 0x01, 0x00]))
        guard case .failed(let e)? = h.events.last else { Issue.record("no failure"); return }
        #expect(e.code == .malformed)
        #expect(e.message.contains("turn:turn.castd.test"))
    }
}

/// The client keeps the one sans-IO contract (`SansIO` in CastCore).
@Suite struct TURNClientContractTests {
    @Test func startDrainsToOneAllocateAndThenOnlyItsDeadlineIsLeft() throws {
        var c = TURNClient(server: TURNClientTests.server())
        c.handle(.start, now: .zero)
        guard case .transmit(let first)? = c.poll() else { Issue.record("no Allocate"); return }
        #expect(try StunMessage(decoding: first).method == StunMessage.allocateMethod)
        #expect(c.poll() == nil && c.poll() == nil)
        let due = try #require(c.nextDeadline())   // the Allocate's retransmission (RFC 8489 §6.2.1)
        c.handleTimeout(now: due - .milliseconds(1))   // early: nothing is due yet
        #expect(c.poll() == nil)
        #expect(c.nextDeadline() == due)
        c.handleTimeout(now: due)                      // due: the same request again …
        #expect(c.poll() == .transmit(first))
        #expect(c.poll() == nil)
        c.handleTimeout(now: due)                      // … once, not twice at the same instant
        #expect(c.poll() == nil)
        #expect(try #require(c.nextDeadline()) > due)
    }

    @Test func theSharedContractHolds() {
        // Each fresh client draws its own transaction ids: requests compare by method.
        func method(_ o: TURNOutput) -> String {
            if case .transmit(let b) = o { return (try? StunMessage(decoding: b)).map { "\($0.method)" } ?? "not STUN" }
            return "\(o)"
        }
        let v = SansIOContract.violations({ TURNClient(server: TURNClientTests.server()) }, inputs: [(.start, .zero)],
                                          same: { method($0) == method($1) })
        #expect(v.isEmpty, "\(v)")
    }
}
