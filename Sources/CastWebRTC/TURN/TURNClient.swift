import CastCore
import CastOpenSSL

/// What the owner gives the TURN client.
public enum TURNInput: Sendable, Equatable {
    /// Send the first Allocate (RFC 8656 §7.1).
    case start
    /// Bytes from the server: one datagram over UDP, any slice of the stream over TCP/TLS.
    case received([UInt8])
    /// Install a permission for a remote candidate's IP (RFC 8656 §9); refreshed every 4 min.
    case createPermission(IPAddress)
    /// Bind a channel to a peer (the selected pair, RFC 8656 §12); data then goes as ChannelData.
    case bindChannel(peer: SocketAddress)
    /// Relay a datagram to a peer: ChannelData when a channel is bound, else a Send indication.
    case send(to: SocketAddress, [UInt8])
    /// Release the allocation: Refresh with LIFETIME 0 (RFC 8656 §8), then `.closed`.
    case close
    /// The TCP or TLS connection to the server is gone (or never came up): `reason` says why.
    /// RFC 8656 §3.1: a stream allocation ends with its connection, so the client fails
    /// (or, while releasing, is simply closed).
    case connectionClosed(reason: String)
}

/// What the TURN client reports.
public enum TURNEvent: Sendable, Equatable {
    /// The relayed transport address (the relay candidate) and the server-reflexive one.
    case allocated(relayed: SocketAddress, mapped: SocketAddress?, lifetime: Duration)
    case refreshed(lifetime: Duration)
    case permissionInstalled(IPAddress)
    case permissionFailed(IPAddress, CastError)
    case channelBound(peer: SocketAddress, channel: UInt16)
    /// A datagram a peer sent to the relayed address.
    case data(from: SocketAddress, [UInt8])
    /// The allocation cannot be used (never made, or lost); the error names the server.
    case failed(CastError)
    /// The allocation was released (or the server stopped answering the release).
    case closed
}

/// One output of `poll()`.
public enum TURNOutput: Sendable, Equatable {
    /// Bytes for the server, over the one socket or stream of this allocation.
    case transmit([UInt8])
    case event(TURNEvent)
}

/// A TURN client for one allocation on one server (RFC 8656), sans-IO in str0m's shape.
///
/// It keeps the one sans-IO contract (`SansIO` in CastCore): after every `handle(input, now:)`
/// the owner calls `poll()` until nil, sending each `.transmit` to the server and acting on
/// each `.event` in that order; then it calls `handleTimeout(now:)` at `nextDeadline()`
/// (early calls are harmless). The client never reads a clock, sleeps or touches a socket.
///
/// Authentication is the long-term credential mechanism (RFC 8489 §9.2): the first
/// Allocate goes without credentials, the 401 brings REALM and NONCE, the retry carries
/// USERNAME, REALM, NONCE and MESSAGE-INTEGRITY (MESSAGE-INTEGRITY-SHA256 when the server
/// offered PASSWORD-ALGORITHMS), and every later request does the same. A 438 brings a
/// new nonce and the request is retried; a 401 after the authenticated retry fails with
/// a sentence naming the server. Credentials never appear in an error.
public struct TURNClient: Sendable, SansIO {
    public let server: TURNServer
    public let timing: TURNTiming
    public private(set) var phase: Phase = .idle
    /// Datagrams or frames from the server that were dropped (malformed, unknown
    /// transaction, bad integrity, unknown channel).
    public private(set) var dropped = 0

    public enum Phase: Sendable, Equatable {
        case idle, allocating
        case allocated(relayed: SocketAddress)
        case closing, closed, failed
    }

    private struct Auth: Sendable {
        var realm: String
        var nonce: [UInt8]
        var key: Redacted<[UInt8]>
        /// RFC 8489 §9.2.5: once PASSWORD-ALGORITHMS was offered, MESSAGE-INTEGRITY-SHA256 only.
        var offered: [StunPasswordAlgorithm]?
        var chosen: StunPasswordAlgorithm?
    }

    private enum Kind: Sendable, Equatable {
        case allocate
        case refresh(lifetime: UInt32?)
        case permission(IPAddress)
        case channelBind(peer: SocketAddress, channel: UInt16)
    }

    private struct Transaction: Sendable {
        var kind: Kind
        var authRetried: Bool
        var staleRetries: Int
    }

    private struct Permission: Sendable {
        var installed = false
        /// The server refused it (403: coturn's denied-peer-ip, say): not asked again, and
        /// nothing is sent there (a server may take a send it cannot route badly).
        var refused = false
        /// nil while a CreatePermission is in flight.
        var refreshAt: Instant?
    }

    private struct Channel: Sendable {
        var number: UInt16
        var confirmed = false
        var refreshAt: Instant?
    }

    private var auth: Auth?
    private var transactions = StunTransactions<Transaction>()
    private var allocationRefreshAt: Instant?
    private var permissions: [IPAddress: Permission] = [:]
    private var channels: [SocketAddress: Channel] = [:]
    private var nextChannel: UInt16 = ChannelData.channelRange.lowerBound
    private var framer = TURNStreamFramer()
    private var outputs = OutputQueue<TURNOutput>()
    private let newTransactionID: @Sendable () -> StunTransactionID

    /// `transactionIDs` is replaceable for tests; the default draws from OpenSSL's RNG.
    public init(server: TURNServer, timing: TURNTiming = TURNTiming(),
                transactionIDs: @escaping @Sendable () -> StunTransactionID = StunTransactionID.random) {
        self.server = server
        self.timing = timing
        self.newTransactionID = transactionIDs
    }

    /// The relayed address once allocated.
    public var relayedAddress: SocketAddress? {
        if case .allocated(let r) = phase { return r } else { return nil }
    }

    /// The channel bound (or being bound) to `peer`.
    public func channel(for peer: SocketAddress) -> UInt16? { channels[peer]?.number }

    // MARK: Contract

    public mutating func handle(_ input: TURNInput, now: Instant) {
        switch input {
        case .start:
            guard phase == .idle else { return }
            phase = .allocating
            begin(.allocate, now: now)
        case .received(let bytes):
            received(bytes, now: now)
        case .createPermission(let ip):
            guard relayedAddress != nil, permissions[ip] == nil else { return }
            permissions[ip] = Permission()
            begin(.permission(ip), now: now)
        case .bindChannel(let peer):
            bindChannel(peer, now: now)
        case .send(let peer, let data):
            send(data, to: peer, now: now)
        case .close:
            close(now: now)
        case .connectionClosed(let reason):
            connectionClosed(reason)
        }
    }

    /// A deadline passed (or the owner merely woke up; early calls are harmless).
    public mutating func handleTimeout(now: Instant) { timeout(now: now) }

    public mutating func poll() -> TURNOutput? { outputs.pop() }

    public func nextDeadline() -> Instant? {
        guard phase != .closed, phase != .failed else { return nil }
        var d = transactions.nextDeadline.map { [$0] } ?? []
        if let t = allocationRefreshAt { d.append(t) }
        d += permissions.values.compactMap(\.refreshAt)
        d += channels.values.compactMap(\.refreshAt)
        return d.min()
    }

    // MARK: Requests

    private mutating func begin(_ kind: Kind, now: Instant, authRetried: Bool = false, staleRetries: Int = 0) {
        let tid = newTransactionID()
        let request = build(kind, tid: tid)
        let stream = server.transport.isStream
        let max = kind == .refresh(lifetime: 0) ? min(timing.closeTransmissions, timing.maxTransmissions) : timing.maxTransmissions
        // Rm·RTO follows a retransmission; a request sent only once waits one RTO, as before.
        let schedule = stream ? .reliable(timeout: timing.reliableTimeout)
            : StunRetransmission(initialRTO: timing.initialRTO, maxTransmissions: max,
                                 lastWait: max > 1 ? timing.initialRTO * timing.lastWaitMultiplier : nil)
        transactions.start(tid, request: request, context: Transaction(kind: kind, authRetried: authRetried, staleRetries: staleRetries),
                           schedule: schedule, now: now)
        emit(.transmit(request))
    }

    private func build(_ kind: Kind, tid: StunTransactionID) -> [UInt8] {
        var attrs: [StunAttribute] = []
        let method: UInt16
        switch kind {
        case .allocate:
            method = StunMessage.allocateMethod
            // RFC 8656 §7.1: REQUESTED-TRANSPORT UDP (protocol 17), whatever the server transport.
            attrs.append(.requestedTransport(17))
            if let l = timing.requestedLifetime { attrs.append(.lifetime(l)) }
        case .refresh(let l):
            method = StunMessage.refreshMethod
            if let l { attrs.append(.lifetime(l)) }
        case .permission(let ip):
            method = StunMessage.createPermissionMethod
            // §10.1: the port of XOR-PEER-ADDRESS is ignored; permissions are per IP.
            attrs.append(.xorPeerAddress(SocketAddress(ip, 0)))
        case .channelBind(let peer, let channel):
            method = StunMessage.channelBindMethod
            attrs += [.channelNumber(channel), .xorPeerAddress(peer)]
        }
        guard let auth else {
            return StunMessage(method: method, class: .request, transactionID: tid, attributes: attrs).encode(fingerprint: true)
        }
        attrs += [.username(server.username), .realm(auth.realm), .nonce(auth.nonce)]
        if let offered = auth.offered, let chosen = auth.chosen {
            // RFC 8489 §9.2.5: echo the offer and name the algorithm the key was made with.
            attrs += [.passwordAlgorithms(offered), .passwordAlgorithm(chosen)]
        }
        return StunMessage(method: method, class: .request, transactionID: tid, attributes: attrs)
            .encode(integrityKey: auth.key.unredacted, sha256: auth.offered != nil, fingerprint: true)
    }

    private mutating func bindChannel(_ peer: SocketAddress, now: Instant) {
        guard relayedAddress != nil, channels[peer] == nil else { return }
        guard nextChannel <= ChannelData.channelRange.upperBound else { return }   // 4096 peers: Send indications then.
        let number = nextChannel
        nextChannel += 1
        channels[peer] = Channel(number: number)
        begin(.channelBind(peer: peer, channel: number), now: now)
    }

    private mutating func send(_ data: [UInt8], to peer: SocketAddress, now: Instant) {
        guard relayedAddress != nil, permissions[peer.ip]?.refused != true else { dropped += 1; return }
        if permissions[peer.ip] == nil {
            permissions[peer.ip] = Permission()
            begin(.permission(peer.ip), now: now)
        }
        if let ch = channels[peer], ch.confirmed {
            emit(.transmit(ChannelData(channel: ch.number, data: data).encode(padded: server.transport.isStream)))
        } else {
            // RFC 8656 §11.1: a Send indication carries XOR-PEER-ADDRESS and DATA, no integrity.
            let m = StunMessage(method: StunMessage.sendMethod, class: .indication, transactionID: newTransactionID(),
                                attributes: [.xorPeerAddress(peer), .data(data)])
            emit(.transmit(m.encode()))
        }
    }

    private mutating func close(now: Instant) {
        switch phase {
        case .allocated:
            transactions.removeAll()
            allocationRefreshAt = nil
            permissions.removeAll()
            channels.removeAll()
            phase = .closing
            begin(.refresh(lifetime: 0), now: now)
        case .idle, .allocating:
            transactions.removeAll()
            phase = .closed
            emit(.event(.closed))
        case .closing, .closed, .failed:
            break
        }
    }

    private mutating func connectionClosed(_ reason: String) {
        switch phase {
        case .closing:
            transactions.removeAll()
            phase = .closed
            emit(.event(.closed))
        case .idle, .allocating, .allocated:
            let what = phase == .allocating || phase == .idle ? "could not allocate" : "lost its allocation"
            fail(CastError(.turnConnection,
                "TURN server \(server.name) \(what): the \(server.transport.rawValue.uppercased()) connection \(reason)"))
        case .closed, .failed:
            break
        }
    }

    // MARK: Received

    private mutating func received(_ bytes: [UInt8], now: Instant) {
        guard phase != .closed, phase != .failed, phase != .idle else { dropped += 1; return }
        if server.transport.isStream {
            let frames: [[UInt8]]
            do { frames = try framer.push(bytes) } catch {
                fail(CastError(.malformed, "TURN server \(server.name) sent bytes that are neither STUN nor ChannelData; the connection is unusable"))
                return
            }
            for f in frames { receivedMessage(f, now: now) }
        } else {
            receivedMessage(bytes, now: now)
        }
    }

    private mutating func receivedMessage(_ bytes: [UInt8], now: Instant) {
        switch PacketKind(classifying: bytes) {
        case .turnChannel:
            guard let cd = try? ChannelData(decoding: bytes),
                  let peer = channels.first(where: { $0.value.number == cd.channel })?.key else { dropped += 1; return }
            emit(.event(.data(from: peer, cd.data)))
        case .stun:
            guard let m = try? StunMessage(decoding: bytes) else { dropped += 1; return }
            switch m.messageClass {
            case .indication:
                // RFC 8656 §11.4: a Data indication from a peer we gave permission to.
                guard m.method == StunMessage.dataMethod, let peer = m.xorPeerAddress, let data = m.dataValue,
                      permissions[peer.ip]?.installed == true else { dropped += 1; return }
                emit(.event(.data(from: peer, data)))
            case .successResponse, .errorResponse:
                response(m, now: now)
            case .request:
                dropped += 1
            }
        default:
            dropped += 1
        }
    }

    private mutating func response(_ m: StunMessage, now: Instant) {
        guard let t = transactions.context(for: m.transactionID) else { dropped += 1; return }
        // RFC 8489 §9.2.5: a response that carries integrity must pass it with our key; one
        // that fails is discarded as if never received (the retransmission timer runs on).
        if let auth {
            let sha256 = auth.offered != nil
            if sha256 ? m.hasIntegritySHA256 : m.hasIntegrity {
                let ok = sha256 ? m.verifyIntegritySHA256(key: auth.key.unredacted) : m.verifyIntegrity(key: auth.key.unredacted)
                guard ok else { dropped += 1; return }
            }
        }
        transactions.finish(m.transactionID)
        if m.messageClass == .successResponse {
            success(m, t, now: now)
        } else {
            error(m, t, now: now)
        }
    }

    private mutating func success(_ m: StunMessage, _ t: Transaction, now: Instant) {
        switch t.kind {
        case .allocate:
            guard let relayed = m.xorRelayedAddress else {
                fail(CastError(.turnRejected, "TURN server \(server.name) answered Allocate without a relayed address"))
                return
            }
            let lifetime = Duration.seconds(Int64(m.lifetime ?? 600))
            phase = .allocated(relayed: relayed)
            allocationRefreshAt = now + refreshDelay(lifetime)
            emit(.event(.allocated(relayed: relayed, mapped: m.xorMappedAddress, lifetime: lifetime)))
        case .refresh(let l):
            if l == 0 {
                phase = .closed
                emit(.event(.closed))
                return
            }
            let lifetime = Duration.seconds(Int64(m.lifetime ?? 600))
            allocationRefreshAt = now + refreshDelay(lifetime)
            emit(.event(.refreshed(lifetime: lifetime)))
        case .permission(let ip):
            guard var p = permissions[ip] else { return }
            let first = !p.installed
            p.installed = true
            p.refreshAt = now + timing.permissionRefresh
            permissions[ip] = p
            if first { emit(.event(.permissionInstalled(ip))) }
        case .channelBind(let peer, let number):
            guard var c = channels[peer], c.number == number else { return }
            let first = !c.confirmed
            c.confirmed = true
            c.refreshAt = now + timing.channelRefresh
            channels[peer] = c
            // §12.2: a ChannelBind also installs or refreshes the permission for the peer's IP.
            var p = permissions[peer.ip] ?? Permission()
            if !p.installed { p.installed = true; emit(.event(.permissionInstalled(peer.ip))) }
            p.refreshAt = now + timing.permissionRefresh
            permissions[peer.ip] = p
            if first { emit(.event(.channelBound(peer: peer, channel: number))) }
        }
    }

    /// The allocation is refreshed `allocationRefreshMargin` before it expires; a lifetime of
    /// 2 minutes or less (a test server) is refreshed at half its lifetime instead.
    private func refreshDelay(_ lifetime: Duration) -> Duration {
        lifetime > timing.allocationRefreshMargin * 2 ? lifetime - timing.allocationRefreshMargin : lifetime / 2
    }

    private mutating func error(_ m: StunMessage, _ t: Transaction, now: Instant) {
        let code = m.errorCode?.code ?? 0
        let reason = m.errorCode.map { Self.printable($0.reason) } ?? ""
        switch code {
        case 401 where !t.authRetried:
            // RFC 8489 §9.2.5: learn realm and nonce, retry once with credentials.
            guard learn(m) else {
                finish(t.kind, CastError(.turnRejected, "TURN server \(server.name) answered 401 without REALM and NONCE"))
                return
            }
            begin(t.kind, now: now, authRetried: true, staleRetries: t.staleRetries)
        case 438 where t.staleRetries < timing.maxStaleNonceRetries:
            // RFC 8489 §9.2.5: 438 Stale Nonce carries the nonce to use from now on.
            guard learn(m) else {
                finish(t.kind, CastError(.turnRejected, "TURN server \(server.name) answered 438 without a new NONCE"))
                return
            }
            begin(t.kind, now: now, authRetried: t.authRetried, staleRetries: t.staleRetries + 1)
        case 401, 441:
            finish(t.kind, CastError(.turnUnauthorized,
                "TURN server \(server.name) refused the credentials from ice-config (\(code) \(reason)); "
                + "they are wrong or have expired: check the server's shared secret and clock"))
        case 437:
            if t.kind == .refresh(lifetime: 0) { phase = .closed; emit(.event(.closed)); return }
            finish(t.kind, CastError(.turnAllocationMismatch,
                "TURN server \(server.name) answered 437 Allocation Mismatch: "
                + (t.kind == .allocate ? "it still holds an allocation for this local port; allocate again from a new port"
                                       : "the allocation no longer exists there")))
        case 486, 508:
            finish(t.kind, CastError(.turnNoCapacity,
                "TURN server \(server.name) has no room for another allocation (\(code) \(reason)); try again later or use another server"))
        default:
            finish(t.kind, CastError(.turnRejected, "TURN server \(server.name) refused \(Self.name(t.kind)) (\(code) \(reason))"))
        }
    }

    /// Takes REALM, NONCE and PASSWORD-ALGORITHMS from a 401 or 438 and derives the key.
    private mutating func learn(_ m: StunMessage) -> Bool {
        guard let nonce = m.nonce, let realm = m.realm ?? auth?.realm else { return false }
        var offered: [StunPasswordAlgorithm]? = nil
        var chosen: StunPasswordAlgorithm? = nil
        // RFC 8489 §9.2.1: the nonce cookie "obMatJos2" announces security features, among
        // them PASSWORD-ALGORITHMS; without it the attribute is ignored (a bid-down guard).
        if nonce.starts(with: Array("obMatJos2".utf8)), let list = m.passwordAlgorithms, !list.isEmpty {
            if list.contains(.sha256) { chosen = .sha256 } else if list.contains(.md5) { chosen = .md5 }
            if chosen != nil { offered = list }
        }
        // RFC 8489 §9.2.2: key = H(username ":" realm ":" password). The OpaqueString profile
        // (RFC 8265) is the identity for the ASCII credentials TURN REST servers hand out.
        let text = Array("\(server.username):\(realm):\(server.password.unredacted)".utf8)
        let key = chosen == .sha256 ? Digest.sha256.hash(text) : Digest.md5(text)
        auth = Auth(realm: realm, nonce: nonce, key: Redacted(key), offered: offered, chosen: chosen)
        return true
    }

    /// A request failed for good: what that means depends on the request.
    private mutating func finish(_ kind: Kind, _ error: CastError) {
        switch kind {
        case .allocate, .refresh:
            if phase == .closing { phase = .closed; emit(.event(.closed)); return }
            fail(error)
        case .permission(let ip):
            if error.code == .turnTimeout { permissions[ip] = nil } else { permissions[ip] = Permission(refused: true) }
            emit(.event(.permissionFailed(ip, error)))
        case .channelBind(let peer, _):
            // Data keeps flowing in Send indications.
            channels[peer] = nil
        }
    }

    private mutating func fail(_ error: CastError) {
        transactions.removeAll()
        allocationRefreshAt = nil
        permissions.removeAll()
        channels.removeAll()
        phase = .failed
        emit(.event(.failed(error)))
    }

    // MARK: Timers

    private mutating func timeout(now: Instant) {
        guard phase != .closed, phase != .failed, phase != .idle else { return }
        // RFC 8489 §6.2.1: retransmit at RTO, 2·RTO, …; after the Rc-th, wait Rm·RTO.
        while let due = transactions.nextDue(now: now) {
            switch due {
            case .retransmit(let request, _):
                emit(.transmit(request))
            case .timedOut(let t, let transmissions):
                finish(t.kind, CastError(.turnTimeout,
                    "TURN server \(server.name) did not answer \(Self.name(t.kind)) (\(transmissions) "
                    + (transmissions == 1 ? "request" : "requests") + " over \(server.transport.rawValue.uppercased()))"))
                if phase == .failed || phase == .closed { return }
            }
        }
        if let at = allocationRefreshAt, at <= now, relayedAddress != nil {
            allocationRefreshAt = nil
            begin(.refresh(lifetime: timing.requestedLifetime), now: now)
        }
        for (ip, p) in permissions.sorted(by: { $0.key.bytes.lexicographicallyPrecedes($1.key.bytes) }) {
            guard let at = p.refreshAt, at <= now else { continue }
            permissions[ip]?.refreshAt = nil
            begin(.permission(ip), now: now)
        }
        for (peer, c) in channels.sorted(by: { $0.value.number < $1.value.number }) {
            guard let at = c.refreshAt, at <= now else { continue }
            channels[peer]?.refreshAt = nil
            begin(.channelBind(peer: peer, channel: c.number), now: now)
        }
    }

    // MARK: Helpers

    private mutating func emit(_ o: TURNOutput) { outputs.push(o) }

    private static func name(_ k: Kind) -> String {
        switch k {
        case .allocate: return "Allocate"
        case .refresh(let l): return l == 0 ? "the final Refresh" : "Refresh"
        case .permission: return "CreatePermission"
        case .channelBind: return "ChannelBind"
        }
    }

    /// A server's reason phrase, cut to printable ASCII and 80 characters before it joins a sentence.
    private static func printable(_ s: String) -> String {
        String(s.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F }.prefix(80).map(Character.init))
    }
}
