import CastCore

/// castd's ICE agent (RFC 8445 full agent, controlling; RFC 8838 trickle; RFC 7675
/// consent), as a pure state machine following the one sans-IO contract (`SansIO` in
/// CastCore): `handle(Input, now:)` and `handleTimeout(now:)` in; `poll()` gives
/// `.transmit` and `.event` outputs in the order they were decided until nil; then
/// `nextDeadline()`. Whether a remote candidate would be kept is a question asked
/// beforehand (`admission(of:)`), not an output.
///
/// It never reads a clock, sleeps or touches a socket. One data stream with one
/// component (BUNDLE + rtcp-mux), so every candidate has component id 1.
public struct ICEAgent: Sendable, SansIO {
    public enum Input: Sendable {
        /// A usable interface address with a bound UDP socket (from the shell).
        case hostCandidate(SocketAddress)
        /// A TURN allocation succeeded (see `RelayCandidate`).
        case relayCandidate(RelayCandidate)
        /// The shell has reported every interface.
        case endOfLocalCandidates
        case remoteCredentials(ufrag: String, pwd: String)
        /// A candidate from the answer or a trickled `ice_candidate` row (`admission(of:)` says
        /// beforehand whether it is kept). Hostnames (mDNS) are held until `.resolved`.
        case remoteCandidate(ICECandidate)
        /// The mDNS answer for a hostname from a remote candidate (empty: unresolvable).
        case resolved(hostname: String, addresses: [IPAddress])
        /// The receiver's `endOfCandidates` (RFC 8838 §4.4): failure may now be declared.
        case endOfRemoteCandidates
        /// A datagram that arrived on our socket bound to `to`, from `from`. The owner passes
        /// only what `PacketKind` classifies as STUN.
        case datagram([UInt8], from: SocketAddress, to: SocketAddress)
        case close
    }

    /// What the agent decided, in order: a datagram to send, or an event to act on.
    public enum Output: Sendable, Equatable {
        case transmit(ICETransmit)
        case event(ICEEvent)
    }

    /// An allocation on a TURN server: its relayed address, the mapped address the server
    /// saw (raddr/rport), the server, and its place in ice-config.
    public struct RelayCandidate: Sendable, Equatable {
        public var relayed: SocketAddress
        public var mapped: SocketAddress?
        public var server: SocketAddress
        public var transport: TURNTransport
        public var serverIndex: Int
        public init(relayed: SocketAddress, mapped: SocketAddress?, server: SocketAddress, transport: TURNTransport, serverIndex: Int) {
            self.relayed = relayed; self.mapped = mapped; self.server = server
            self.transport = transport; self.serverIndex = serverIndex
        }
    }

    public let config: ICEConfig
    public private(set) var state: ICEConnectionState = .new
    public private(set) var controlling = true
    public private(set) var localCandidates: [LocalCandidate] = []
    public private(set) var remoteCandidates: [ICECandidate] = []
    /// The checklist, highest priority first (RFC 8445 §6.1.2.3).
    public private(set) var pairs: [CandidatePair] = []
    /// Datagrams that were not valid STUN for this agent (counted and dropped, never trapped on).
    public private(set) var droppedDatagrams = 0

    private var remoteUfrag: String?
    private var remotePwd: String?
    private var remoteEnded = false
    private var localEnded = false
    private var gatheringCompleteSent = false
    private var pendingHostnames: [String: [ICECandidate]] = [:]
    private var transactions = StunTransactions<Transaction>()
    private var triggered: [PairKey] = []
    private var nextCheckAt: Instant?
    private var firstValidAt: Instant?
    private var checkingSince: Instant?
    private var nominating: PairKey?
    private var selectedKey: PairKey?
    private var lastConsent: Instant?
    private var nextConsentAt: Instant?
    private var outputs = OutputQueue<Output>()
    private var jitter: JitterRandom
    private let newTransactionID: @Sendable () -> StunTransactionID

    static let maxRemoteCandidates = 64
    static let maxPendingHostnames = 16

    struct PairKey: Hashable, Sendable {
        var local: SocketAddress
        var remote: SocketAddress
    }

    struct Transaction: Sendable {
        enum Kind: Sendable {
            case check(PairKey, useCandidate: Bool)
            case consent(PairKey)
            case gather(base: SocketAddress, server: SocketAddress)
        }
        var kind: Kind
        var from: SocketAddress
        var to: SocketAddress
    }

    /// `transactionIDs` is replaceable for tests; the default draws from OpenSSL's RNG
    /// (unpredictable ids protect unauthenticated STUN-server responses, RFC 8489 §5).
    public init(config: ICEConfig, transactionIDs: @escaping @Sendable () -> StunTransactionID = StunTransactionID.random) {
        self.config = config
        self.jitter = JitterRandom(seed: config.seed)
        self.newTransactionID = transactionIDs
    }

    // MARK: The contract

    public mutating func handle(_ input: Input, now: Instant) {
        switch input {
        case .hostCandidate(let base): addHostCandidate(base, now: now)
        case .relayCandidate(let r): addRelayCandidate(r, now: now)
        case .endOfLocalCandidates: endOfLocalCandidates()
        case .remoteCredentials(let ufrag, let pwd): setRemoteCredentials(ufrag: ufrag, pwd: pwd, now: now)
        case .remoteCandidate(let c): addRemoteCandidate(c, now: now)
        case .resolved(let hostname, let addresses): resolved(hostname: hostname, to: addresses, now: now)
        case .endOfRemoteCandidates: endOfRemoteCandidates()
        case .datagram(let bytes, let from, let to): handle(datagram: bytes, from: from, to: to, now: now)
        case .close: close()
        }
    }

    public mutating func poll() -> Output? { outputs.pop() }

    private mutating func emit(_ e: ICEEvent) { outputs.push(.event(e)) }
    private mutating func transmit(_ t: ICETransmit) { outputs.push(.transmit(t)) }

    /// The selected pair once connected (media flows local → remote).
    public var selectedPair: (local: SocketAddress, remote: SocketAddress)? {
        selectedKey.map { ($0.local, $0.remote) }
    }

    /// When `handleTimeout(now:)` must be called next; nil when nothing is pending.
    public func nextDeadline() -> Instant? {
        if state == .closed || state == .failed { return nil }
        // Folded pairwise, not collected in an array: the driver asks on every turn (issue 19).
        var d: Instant? = nil
        d = Self.earliest(d, transactions.nextDeadline)
        d = Self.earliest(d, nextCheckAt)
        d = Self.earliest(d, nominationDeadline)
        if selectedKey != nil, let last = lastConsent {
            d = Self.earliest(d, nextConsentAt)
            if state == .connected { d = Self.earliest(d, last + config.disconnectedTimeout) }
            d = Self.earliest(d, last + config.consentTimeout)
        }
        if state == .checking, let s = checkingSince { d = Self.earliest(d, s + config.checkingTimeout) }
        return d
    }

    /// The earlier of two optional instants (CastRTP's `Instant.earliest`; ICE does not import CastRTP).
    private static func earliest(_ a: Instant?, _ b: Instant?) -> Instant? {
        guard let a else { return b }
        guard let b else { return a }
        return min(a, b)
    }

    // MARK: Local candidates

    /// Emits the host candidate for trickling and starts server-reflexive gathering from it
    /// (RFC 8445 §5.1.1).
    private mutating func addHostCandidate(_ base: SocketAddress, now: Instant) {
        guard state != .closed, state != .failed, !localCandidates.contains(where: { $0.base == base }) else { return }
        // RFC 8421 §4: prefer IPv6; among one family, earlier interfaces first.
        let sameFamily = localCandidates.filter { $0.candidate.type == .host && $0.base.ip.isIPv6 == base.ip.isIPv6 }.count
        let pref = (base.ip.isIPv6 ? UInt32(0xFFFF) : 0x7FFF) - UInt32(min(sameFamily, 0x7FFF))
        let c = ICECandidate(
            foundation: Self.foundation(.host, base.ip, server: nil),
            priority: ICECandidate.priority(type: .host, localPreference: pref),
            address: .ip(base.ip), port: base.port, type: .host,
            extensions: [.init("generation", "0"), .init("ufrag", config.localUfrag)])
        let local = LocalCandidate(candidate: c, base: base, localPreference: pref)
        localCandidates.append(local)
        emit(.localCandidate(c))
        for r in remoteCandidates { addPair(local, r) }
        for server in config.stunServers where server.ip.isIPv6 == base.ip.isIPv6 && !base.ip.isLoopback {
            let tid = newTransactionID()
            let req = StunMessage(class: .request, transactionID: tid).encode(fingerprint: true)
            start(Transaction(kind: .gather(base: base, server: server), from: base, to: server), id: tid,
                  request: req, maxTransmissions: config.maxTransmissions, now: now)
        }
        startCheckingIfReady(now: now)
    }

    /// An allocation on a TURN server succeeded: `relayed` becomes a relay candidate, its own
    /// base (RFC 8445 §5.1.1.2), paired with every remote candidate. What ICE sends from it the
    /// owner relays through the TURN client. RFC 8445 §5.1.2.2: relay has type preference 0,
    /// the lowest; the local preference ranks UDP above TCP above TLS to the server, then
    /// ice-config's order of servers.
    private mutating func addRelayCandidate(_ r: RelayCandidate, now: Instant) {
        let (relayed, mapped, server, transport, serverIndex) = (r.relayed, r.mapped, r.server, r.transport, r.serverIndex)
        guard state != .closed, state != .failed, !localCandidates.contains(where: { $0.base == relayed }) else { return }
        let rank: UInt32 = switch transport { case .udp: 3; case .tcp: 2; case .tls: 1 }
        let pref = rank << 14 | (0x3FFF - UInt32(min(serverIndex, 0x3FFF)))
        var c = ICECandidate(
            foundation: Self.foundation(.relay, relayed.ip, server: server),
            priority: ICECandidate.priority(type: .relay, localPreference: pref),
            address: .ip(relayed.ip), port: relayed.port, type: .relay,
            extensions: [.init("generation", "0"), .init("ufrag", config.localUfrag)])
        // RFC 8839 §5.1: raddr/rport of a relayed candidate is the mapped address.
        if let mapped {
            c.relatedAddress = mapped.ip.description
            c.relatedPort = mapped.port
        }
        let local = LocalCandidate(candidate: c, base: relayed, localPreference: pref)
        localCandidates.append(local)
        emit(.localCandidate(c))
        for r in remoteCandidates { addPair(local, r) }
        startCheckingIfReady(now: now)
    }

    /// Gathering completes when the STUN servers answered or timed out.
    private mutating func endOfLocalCandidates() {
        localEnded = true
        maybeCompleteGathering()
    }

    // MARK: Remote side

    private mutating func setRemoteCredentials(ufrag: String, pwd: String, now: Instant) {
        remoteUfrag = ufrag
        remotePwd = pwd
        // Drop candidates of another generation (RFC 8838 §5.4: the ufrag names the generation).
        remoteCandidates.removeAll { c in c.ufrag.map { $0 != ufrag } ?? false }
        startCheckingIfReady(now: now)
    }

    /// What becomes of a remote candidate given to `handle(.remoteCandidate(_:), now:)`.
    public enum RemoteCandidateOutcome: Equatable, Sendable {
        /// Kept (or held for its hostname's resolution).
        case kept
        /// Not usable here and skipped quietly, as RFC 8445 allows (TCP, RTCP, another generation,
        /// already known).
        case skipped
        /// Dropped because the bounds are reached (the caller reports it).
        case overBound
        /// Its address is no unicast destination (multicast, broadcast, unspecified, port 0):
        /// refused, so that checks never go there (the caller reports it).
        case refusedAddress
    }

    /// What `handle(.remoteCandidate(c), now:)` would do with `c` in the agent's present
    /// state: a question (no state changes), asked before the input by an owner that reports
    /// refusals.
    public func admission(of c: ICECandidate) -> RemoteCandidateOutcome {
        guard state != .closed, state != .failed, c.isUDP, c.component == 1 else { return .skipped }
        if let u = c.ufrag, let r = remoteUfrag, u != r { return .skipped }
        if let addr = c.socketAddress, !addr.ip.isUnicastDestination || addr.port == 0 { return .refusedAddress }
        // Bounded state whatever the signaling channel delivers.
        guard remoteCandidates.count < Self.maxRemoteCandidates else { return .overBound }
        guard let addr = c.socketAddress else {
            let name = c.address.text
            guard pendingHostnames[name] != nil || pendingHostnames.count < Self.maxPendingHostnames,
                  pendingHostnames[name, default: []].count + remoteCandidates.count < Self.maxRemoteCandidates
            else { return .overBound }
            return .kept
        }
        if let i = remoteCandidates.firstIndex(where: { $0.socketAddress == addr }) {
            // A signalled candidate replaces a peer-reflexive one learned from a check (§7.3.1.3).
            guard remoteCandidates[i].type == .prflx, c.type != .prflx else { return .skipped }
        }
        return .kept
    }

    /// Hostnames (mDNS) are held until `.resolved`.
    private mutating func addRemoteCandidate(_ c: ICECandidate, now: Instant) {
        guard admission(of: c) == .kept else { return }
        guard let addr = c.socketAddress else {
            let name = c.address.text
            if pendingHostnames[name] == nil { emit(.needsResolution(hostname: name)) }
            pendingHostnames[name, default: []].append(c)
            return
        }
        if let i = remoteCandidates.firstIndex(where: { $0.socketAddress == addr }) {
            // Admitted, so a signalled candidate that replaces a peer-reflexive one (§7.3.1.3).
            remoteCandidates[i] = c
            for j in pairs.indices where pairs[j].remote == addr { pairs[j].remotePriority = c.priority }
            sortPairs()
            // The prflx candidate was paired only with the socket its check arrived on.
            for l in localCandidates where l.isOwnBase { addPair(l, c) }
            startCheckingIfReady(now: now)
            return
        }
        remoteCandidates.append(c)
        for l in localCandidates where l.isOwnBase { addPair(l, c) }
        startCheckingIfReady(now: now)
    }

    private mutating func resolved(hostname: String, to addresses: [IPAddress], now: Instant) {
        guard let cands = pendingHostnames.removeValue(forKey: hostname) else { return }
        for c in cands {
            for ip in addresses {
                var r = c
                r.address = .ip(ip)
                addRemoteCandidate(r, now: now)
            }
        }
        checkForFailure()
    }

    private mutating func endOfRemoteCandidates() {
        remoteEnded = true
        checkForFailure()
    }

    private mutating func close() {
        guard state != .closed else { return }
        stopAll()
        setState(.closed)
    }

    // MARK: Datagrams

    private mutating func handle(datagram: [UInt8], from: SocketAddress, to: SocketAddress, now: Instant) {
        guard state != .closed, state != .failed else { return }
        guard let msg = try? StunMessage(decoding: datagram) else { droppedDatagrams += 1; return }
        guard msg.method == StunMessage.bindingMethod else { droppedDatagrams += 1; return }
        switch msg.messageClass {
        case .request: handleRequest(msg, from: from, to: to, now: now)
        case .successResponse, .errorResponse: handleResponse(msg, from: from, to: to, now: now)
        case .indication: break   // Binding indications are keepalives (RFC 8445 §11); nothing to do.
        }
    }

    // MARK: Timers

    public mutating func handleTimeout(now: Instant) {
        guard state != .closed, state != .failed else { return }
        // Retransmissions (RFC 8489 §6.2.1).
        while let due = transactions.nextDue(now: now) {
            switch due {
            case .retransmit(let request, let t): transmit(ICETransmit(from: t.from, to: t.to, datagram: request))
            case .timedOut(let t, _): transactionTimedOut(t, now: now)
            }
            if state == .failed { return }
        }
        if state == .failed { return }
        if let t = nominationDeadline, t <= now { nominate(now: now) }
        if let t = nextCheckAt, t <= now { tick(now: now) }
        if let key = selectedKey, let last = lastConsent {
            if now - last >= config.consentTimeout {
                // RFC 7675 §5.1: consent expired; stop sending and fail.
                fail()
                return
            }
            if state == .connected, now - last >= config.disconnectedTimeout {
                setState(.disconnected)
                nextConsentAt = now          // probe at once, then every consentRetryInterval
            }
            if let n = nextConsentAt, n <= now {
                sendRequest(on: key, kind: .consent(key), useCandidate: false, now: now)
                nextConsentAt = now + (state == .disconnected ? config.consentRetryInterval
                                                              : jitter.scale(config.consentInterval, lo: 0.8, hi: 1.2))
            }
        }
        if state == .checking, let s = checkingSince, now - s >= config.checkingTimeout { fail() }
    }

    // MARK: Checklist

    private mutating func addPair(_ l: LocalCandidate, _ r: ICECandidate) {
        guard let remote = r.socketAddress, remote.ip.isIPv6 == l.base.ip.isIPv6,
              remote.ip.isLoopback == l.base.ip.isLoopback,
              !pairs.contains(where: { $0.local == l.base && $0.remote == remote }) else { return }
        var p = CandidatePair(local: l.base, remote: remote, localPriority: l.candidate.priority,
                              remotePriority: r.priority, localPreference: l.localPreference,
                              foundation: l.candidate.foundation + ":" + r.foundation)
        // §6.1.2.6: one pair per foundation starts Waiting, the others Frozen.
        p.state = pairs.contains(where: { $0.foundation == p.foundation && $0.state != .failed }) ? .frozen : .waiting
        if pairs.count >= config.maxPairs {
            // §6.1.2.5: keep the best pairs.
            guard let worst = pairs.last, worst.priority(weAreControlling: controlling) < p.priority(weAreControlling: controlling),
                  worst.state == .frozen || worst.state == .waiting else { return }
            pairs.removeLast()
        }
        pairs.append(p)
        sortPairs()
    }

    private mutating func sortPairs() {
        let c = controlling
        pairs.sort { $0.priority(weAreControlling: c) > $1.priority(weAreControlling: c) }
    }

    private func index(_ k: PairKey) -> Int? { pairs.firstIndex { $0.local == k.local && $0.remote == k.remote } }

    private mutating func startCheckingIfReady(now: Instant) {
        guard remotePwd != nil, !pairs.isEmpty, selectedKey == nil else { return }
        if state == .new {
            checkingSince = now
            setState(.checking)
        }
        if state == .checking, nextCheckAt == nil { nextCheckAt = now }
    }

    /// One paced step (RFC 8445 §6.1.4.2): a triggered check first, else the best Waiting
    /// pair, else unfreeze the best Frozen one.
    private mutating func tick(now: Instant) {
        nextCheckAt = nil
        guard state == .checking || state == .new, selectedKey == nil, remotePwd != nil else { return }
        var chosen: Int?
        var useCandidate = false
        while !triggered.isEmpty, chosen == nil {
            let k = triggered.removeFirst()
            if let i = index(k), pairs[i].state != .inProgress || nominating == k {
                chosen = i
                useCandidate = controlling && nominating == k
            }
        }
        if chosen == nil { chosen = pairs.firstIndex { $0.state == .waiting } }
        if chosen == nil { chosen = pairs.firstIndex { $0.state == .frozen } }
        guard let i = chosen else { return }
        let key = PairKey(local: pairs[i].local, remote: pairs[i].remote)
        pairs[i].state = .inProgress
        sendRequest(on: key, kind: .check(key, useCandidate: useCandidate), useCandidate: useCandidate, now: now)
        nextCheckAt = now + config.ta
    }

    private mutating func schedule(_ k: PairKey, now: Instant, front: Bool = false) {
        triggered.removeAll { $0 == k }
        if front { triggered.insert(k, at: 0) } else { triggered.append(k) }
        if nextCheckAt == nil, state == .checking || state == .new { nextCheckAt = now }
    }

    /// A connectivity check or consent check (RFC 8445 §7.1.1, RFC 7675 §5.1).
    private mutating func sendRequest(on key: PairKey, kind: Transaction.Kind, useCandidate: Bool, now: Instant) {
        guard let ufrag = remoteUfrag, let pwd = remotePwd, let i = index(key) else { return }
        let tid = newTransactionID()
        var attrs: [StunAttribute] = [
            .username("\(ufrag):\(config.localUfrag)"),
            // §7.1.1: the priority a peer-reflexive candidate learned from this check would get.
            .priority(ICECandidate.priority(type: .prflx, localPreference: pairs[i].localPreference)),
            controlling ? .iceControlling(tieBreaker: config.tieBreaker) : .iceControlled(tieBreaker: config.tieBreaker),
        ]
        if useCandidate { attrs.append(.useCandidate) }
        let req = StunMessage(class: .request, transactionID: tid, attributes: attrs)
            .encode(integrityKey: Array(pwd.utf8), fingerprint: true)
        var max = config.maxTransmissions
        if case .consent = kind { max = 3 }   // consent checks are repeated every ~5 s anyway
        start(Transaction(kind: kind, from: key.local, to: key.remote), id: tid, request: req, maxTransmissions: max, now: now)
    }

    private mutating func start(_ t: Transaction, id: StunTransactionID, request: [UInt8], maxTransmissions: Int, now: Instant) {
        let schedule = StunRetransmission(initialRTO: config.initialRTO, maxRTO: config.maxRTO, maxTransmissions: maxTransmissions)
        transactions.start(id, request: request, context: t, schedule: schedule, now: now)
        transmit(ICETransmit(from: t.from, to: t.to, datagram: request))
    }

    private mutating func transactionTimedOut(_ t: Transaction, now: Instant) {
        switch t.kind {
        case .gather:
            maybeCompleteGathering()
        case .consent:
            break   // consent expiry is decided by time since the last response
        case .check(let k, _):
            if let i = index(k), pairs[i].state == .inProgress { pairs[i].state = .failed }
            if nominating == k { nominating = nil }
            checkForFailure()
        }
    }

    // MARK: Nomination (regular nomination by the controlling agent, RFC 8445 §8.1.1)

    private var bestValid: Int? { pairs.firstIndex { $0.valid && $0.state == .succeeded } }

    private var nominationDeadline: Instant? {
        guard controlling, selectedKey == nil, nominating == nil, let f = firstValidAt else { return nil }
        return f + config.nominationDelay
    }

    /// Nominates now when no better pair can still succeed; otherwise `nominationDelay`
    /// after the first valid pair.
    private mutating func maybeNominate(now: Instant) {
        guard controlling, selectedKey == nil, nominating == nil, let b = bestValid else { return }
        let better = pairs[..<b].contains { $0.state != .failed }
        if !better { nominate(now: now) }
    }

    private mutating func nominate(now: Instant) {
        guard controlling, selectedKey == nil, nominating == nil, let b = bestValid else { return }
        let k = PairKey(local: pairs[b].local, remote: pairs[b].remote)
        nominating = k
        schedule(k, now: now, front: true)
    }

    private mutating func select(_ i: Int, now: Instant) {
        guard selectedKey == nil else { return }
        pairs[i].nominated = true
        let k = PairKey(local: pairs[i].local, remote: pairs[i].remote)
        selectedKey = k
        nominating = nil
        triggered.removeAll()
        nextCheckAt = nil
        // §8.1.2: no further checks; pending check transactions are dropped.
        transactions.removeAll { if case .check = $0.kind { return true } else { return false } }
        lastConsent = now
        nextConsentAt = now + jitter.scale(config.consentInterval, lo: 0.8, hi: 1.2)
        emit(.selectedPair(local: k.local, remote: k.remote))
        setState(.connected)
    }

    // MARK: Responses

    private mutating func handleResponse(_ m: StunMessage, from: SocketAddress, to: SocketAddress, now: Instant) {
        guard let t = transactions.context(for: m.transactionID) else { droppedDatagrams += 1; return }
        switch t.kind {
        case .gather(let base, let server):
            guard from == server, to == base else { droppedDatagrams += 1; return }
            transactions.finish(m.transactionID)
            if m.messageClass == .successResponse, let mapped = m.xorMappedAddress, mapped != base,
               !localCandidates.contains(where: { $0.candidate.socketAddress == mapped }),
               let host = localCandidates.first(where: { $0.base == base }) {
                let c = ICECandidate(
                    foundation: Self.foundation(.srflx, base.ip, server: server),
                    priority: ICECandidate.priority(type: .srflx, localPreference: host.localPreference),
                    address: .ip(mapped.ip), port: mapped.port, type: .srflx,
                    relatedAddress: base.ip.description, relatedPort: base.port,
                    extensions: [.init("generation", "0"), .init("ufrag", config.localUfrag)])
                localCandidates.append(LocalCandidate(candidate: c, base: base, localPreference: host.localPreference))
                emit(.localCandidate(c))
            }
            maybeCompleteGathering()

        case .check(let key, _), .consent(let key):
            // §7.2.5.1/§7.2.5.2: responses are authenticated with the remote password.
            guard let pwd = remotePwd, m.hasValidFingerprint, m.verifyIntegrity(key: Array(pwd.utf8)) else {
                droppedDatagrams += 1
                return
            }
            transactions.finish(m.transactionID)
            var isConsent = false
            var nominatingCheck = false
            switch t.kind {
            case .consent: isConsent = true
            case .check(_, let u): nominatingCheck = u
            case .gather: break
            }
            if isConsent {
                if m.messageClass == .successResponse, from == key.remote, to == key.local, selectedKey == key {
                    lastConsent = now
                    if state == .disconnected { setState(.connected) }
                }
                return
            }
            guard let i = index(key) else { return }
            if m.messageClass == .errorResponse {
                if m.errorCode?.code == 487 {
                    // §7.2.5.1: role conflict; switch role and retry the check.
                    controlling.toggle()
                    emit(.roleChanged(controlling: controlling))
                    nominating = nil
                    sortPairs()
                    if let j = index(key) { pairs[j].state = .waiting }
                    schedule(key, now: now)
                } else {
                    pairs[i].state = .failed
                    if nominating == key { nominating = nil }
                    checkForFailure()
                }
                return
            }
            // §7.2.5.2.1: the response must come from where the request went, to where it came from.
            guard from == key.remote, to == key.local else {
                pairs[i].state = .failed
                checkForFailure()
                return
            }
            if let mapped = m.xorMappedAddress, !localCandidates.contains(where: { $0.candidate.socketAddress == mapped }),
               let host = localCandidates.first(where: { $0.base == key.local }) {
                // §7.2.5.3.1: a peer-reflexive local candidate; it is not signalled.
                let c = ICECandidate(foundation: Self.foundation(.prflx, key.local.ip, server: nil),
                                     priority: m.priority ?? ICECandidate.priority(type: .prflx, localPreference: host.localPreference),
                                     address: .ip(mapped.ip), port: mapped.port, type: .prflx,
                                     relatedAddress: key.local.ip.description, relatedPort: key.local.port)
                localCandidates.append(LocalCandidate(candidate: c, base: key.local, localPreference: host.localPreference))
            }
            pairs[i].state = .succeeded
            pairs[i].valid = true
            if firstValidAt == nil { firstValidAt = now }
            // §7.2.5.3.3: unfreeze pairs with the same foundation.
            let f = pairs[i].foundation
            for j in pairs.indices where pairs[j].state == .frozen && pairs[j].foundation == f { pairs[j].state = .waiting }
            if nominatingCheck || (!controlling && pairs[i].nominateOnSuccess) {
                select(i, now: now)
            } else {
                maybeNominate(now: now)
            }
        }
    }

    // MARK: Requests

    private mutating func handleRequest(_ m: StunMessage, from: SocketAddress, to: SocketAddress, now: Instant) {
        guard localCandidates.contains(where: { $0.base == to }) else { droppedDatagrams += 1; return }
        // RFC 8445 §7.3 / RFC 8489 §9.1.3: FINGERPRINT and short-term credentials.
        guard m.hasValidFingerprint else { droppedDatagrams += 1; return }
        guard let user = m.username, m.hasIntegrity else {
            respondError(m, code: 400, reason: "Bad Request", from: to, to: from)
            return
        }
        guard user.hasPrefix(config.localUfrag + ":"), m.verifyIntegrity(key: Array(config.localPwd.utf8)) else {
            respondError(m, code: 401, reason: "Unauthorized", from: to, to: from)
            return
        }
        let unknown = m.unknownComprehensionRequired
        if !unknown.isEmpty {
            respondError(m, code: 420, reason: "Unknown Attribute", from: to, to: from, extra: [.unknownAttributes(unknown)])
            return
        }
        // §7.3.1.1: role conflicts.
        if controlling, let theirs = m.iceControlling {
            if config.tieBreaker >= theirs {
                respondError(m, code: 487, reason: "Role Conflict", from: to, to: from)
                return
            }
            switchRole()
        } else if !controlling, let theirs = m.iceControlled {
            if config.tieBreaker >= theirs {
                switchRole()
            } else {
                respondError(m, code: 487, reason: "Role Conflict", from: to, to: from)
                return
            }
        }
        let resp = StunMessage(class: .successResponse, transactionID: m.transactionID,
                               attributes: [.xorMappedAddress(from)])
            .encode(integrityKey: Array(config.localPwd.utf8), fingerprint: true)
        transmit(ICETransmit(from: to, to: from, datagram: resp))

        // §7.3.1.3: a source we did not know is a peer-reflexive remote candidate.
        if !remoteCandidates.contains(where: { $0.socketAddress == from }), remoteCandidates.count < Self.maxRemoteCandidates {
            let prio = m.priority ?? ICECandidate.priority(type: .prflx, localPreference: 0)
            let c = ICECandidate(foundation: Self.foundation(.prflx, from.ip, server: nil), priority: prio,
                                 address: .ip(from.ip), port: from.port, type: .prflx)
            remoteCandidates.append(c)
        }
        // Also when the source is already known: a check from it to another of our sockets
        // (a loopback one, say, which cannot pair with it) left this pair unformed.
        if let l = localCandidates.first(where: { $0.base == to }), let c = remoteCandidates.first(where: { $0.socketAddress == from }) {
            addPair(l, c)
        }
        guard let i = index(PairKey(local: to, remote: from)) else { return }
        let key = PairKey(local: to, remote: from)
        let useCandidate = m.useCandidate && !controlling
        if selectedKey != nil { return }
        // §7.3.1.4 triggered checks; §7.3.1.5 nomination when controlled.
        switch pairs[i].state {
        case .succeeded:
            if useCandidate { select(i, now: now) }
        case .inProgress:
            if useCandidate { pairs[i].nominateOnSuccess = true }
        case .waiting, .frozen, .failed:
            pairs[i].state = .waiting
            if useCandidate { pairs[i].nominateOnSuccess = true }
            schedule(key, now: now)
        }
        startCheckingIfReady(now: now)
    }

    private mutating func switchRole() {
        controlling.toggle()
        nominating = nil
        emit(.roleChanged(controlling: controlling))
        sortPairs()
    }

    private mutating func respondError(_ m: StunMessage, code: Int, reason: String, from: SocketAddress,
                                       to: SocketAddress, extra: [StunAttribute] = []) {
        var attrs: [StunAttribute] = [.errorCode(code: code, reason: reason)] + extra
        attrs.append(.software("castd"))
        // 487 is authenticated (§7.3.1.1 needs the peer to trust it); 400/401 cannot be.
        let key: [UInt8]? = (code == 487 || code == 420) ? Array(config.localPwd.utf8) : nil
        let resp = StunMessage(class: .errorResponse, transactionID: m.transactionID, attributes: attrs)
            .encode(integrityKey: key, fingerprint: true)
        transmit(ICETransmit(from: from, to: to, datagram: resp))
    }

    // MARK: State

    private mutating func maybeCompleteGathering() {
        guard localEnded, !gatheringCompleteSent else { return }
        let gathering = transactions.contains { if case .gather = $0.kind { return true } else { return false } }
        if !gathering {
            gatheringCompleteSent = true
            emit(.gatheringComplete)
        }
    }

    /// §8.2 / RFC 8838 §8: failed only once every pair failed and no candidate can still arrive.
    private mutating func checkForFailure() {
        guard state == .checking, selectedKey == nil, remoteEnded, pendingHostnames.isEmpty,
              !pairs.isEmpty, pairs.allSatisfy({ $0.state == .failed }) else { return }
        fail()
    }

    private mutating func fail() {
        stopAll()
        setState(.failed)
    }

    private mutating func stopAll() {
        transactions.removeAll()
        triggered.removeAll()
        nextCheckAt = nil
        nextConsentAt = nil
        nominating = nil
        firstValidAt = nil
    }

    private mutating func setState(_ s: ICEConnectionState) {
        guard s != state else { return }
        state = s
        emit(.stateChanged(s))
    }

    /// RFC 8445 §5.1.1.3: same type, base IP and STUN server ⇒ same foundation.
    static func foundation(_ type: CandidateType, _ base: IPAddress, server: SocketAddress?) -> String {
        let key = "\(type.rawValue)|\(base)|\(server?.unredactedText ?? "")|udp"
        return String(CRC32.checksum(Array(key.utf8)))
    }
}
