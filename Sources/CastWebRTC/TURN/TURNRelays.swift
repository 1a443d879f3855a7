import CastCore

/// The TURN allocations of one peer connection: one `TURNClient` per TURN server of
/// ice-config, allocated from a host socket of the server's address family (the socket
/// the host candidate uses, as browsers do). Pure, and keeps the one `SansIO` contract:
/// `handle(input, now:)`, then `poll()` until nil (outputs in decision order), then
/// `handleTimeout(now:)` at `nextDeadline()`; its clients keep the same contract.
/// `claims(_:from:to:)` and `isRelayed(_:)` are questions, asked before an input.
///
/// To ICE, a relayed address is one more local socket (RFC 8445 §5.1.1.2: a relayed
/// candidate is its own base): what ICE, DTLS and SRTP send "from" it goes in as `.send`,
/// and what peers send to it comes back as `.data`.
///
/// A UDP server is allocated on from a host socket (`.addBase`). A TCP or TLS server
/// (RFC 8656 §3.1) needs a connection of its own: the shell opens it and reports its local
/// address with `.addStream(server:local:)`; the connection's bytes then come in and go
/// out under that address, as if it were a socket (any slice of the stream: the client
/// frames it), and `.streamClosed(local:reason:)` ends that allocation (also when it comes
/// before `.addStream`: the shell's thread may see a connection fail before the work that adds
/// it has run).
public struct TURNRelays: Sendable, SansIO {
    public enum Input: Sendable {
        /// A host socket is ready: allocate on every UDP server of its family not yet allocated on.
        case addBase(SocketAddress)
        /// The shell opened (or is opening) the TCP/TLS connection to `servers[server]` from
        /// `local`: allocate over it. What the client sends before the connection is up, the
        /// shell holds; if it never comes up, `.streamClosed` says so.
        case addStream(server: Int, local: SocketAddress)
        /// The connection from `local` closed or failed (`reason` completes "the TCP connection …"):
        /// its allocation is gone (RFC 8656 §3.1); ICE goes on over the others.
        /// A close for a connection not added yet is kept until `.addStream` names it.
        case streamClosed(local: SocketAddress, reason: String)
        /// The shell could not even open a connection to `servers[server]` (no socket): that
        /// allocation fails at once with `reason`.
        case streamFailed(server: Int, reason: String)
        /// No more host sockets will come: gathering may finish once the allocations have.
        case endOfBases
        /// A datagram (or stream slice) that arrived on `to` from `from` and that
        /// `claims(_:from:to:)` said is for a TURN client.
        case datagram([UInt8], from: SocketAddress, to: SocketAddress)
        /// Relay a datagram from the relayed address `from` to `to` (permission made on the way).
        case send([UInt8], from: SocketAddress, to: SocketAddress)
        /// A permission for a remote candidate's address on every allocation, so its checks
        /// are let in before ours went out (RFC 8656 §9).
        case permit(IPAddress)
        /// The selected pair runs through `relayed`: bind a channel to the peer (RFC 8656 §12).
        case bindChannel(relayed: SocketAddress, peer: SocketAddress)
        /// Release every allocation (Refresh with LIFETIME 0).
        case close
    }

    public enum Output: Sendable, Equatable {
        /// A datagram for a TURN server, from the host socket the allocation uses.
        case transmit(Transmit)
        /// An allocation succeeded: add its relay candidate (`index` orders the servers).
        case allocated(server: TURNServer, index: Int, relayed: SocketAddress, mapped: SocketAddress?)
        /// A peer's datagram arrived at `relayed`: handle it as if it came in on that socket.
        case data(from: SocketAddress, to: SocketAddress, [UInt8])
        /// An allocation could not be made, or was lost; the message names the server.
        case failed(server: TURNServer, CastError)
        /// Every allocation that was started has succeeded or failed (for endOfCandidates).
        case gatheringFinished
    }

    private struct Entry: Sendable {
        var client: TURNClient
        var index: Int
        var base: SocketAddress
        var finishedGathering = false
        /// Kept after the allocation is lost, so that what ICE still sends from it is
        /// dropped rather than sent from a host socket.
        var relayed: SocketAddress?
    }

    public let servers: [TURNServer]
    public let timing: TURNTiming
    private var entries: [Entry] = []
    private var outputs = OutputQueue<Output>()
    private var gatheringReported = false
    private var basesEnded = false
    /// Connections that ended before `addStream` named them: the shell's thread may poll a
    /// connection (and see a refused connect or a failed TLS handshake) before the work that
    /// adds it to this value has run. Bounded by `earlyClosesKept`.
    private var earlyCloses: [(local: SocketAddress, reason: String)] = []
    static let earlyClosesKept = 16

    public init(servers: [TURNServer], timing: TURNTiming = TURNTiming()) {
        self.servers = servers
        self.timing = timing
    }

    /// The TCP and TLS servers, by their index in `servers`: each needs a connection from the shell.
    public var streamServers: [(index: Int, server: TURNServer)] {
        servers.enumerated().filter { $0.element.transport.isStream }.map { ($0.offset, $0.element) }
    }

    /// Outputs are waiting to be polled.
    public var hasOutput: Bool { !outputs.isEmpty }

    /// Whether any allocation is still being made.
    public var gathering: Bool { entries.contains { !$0.finishedGathering } }

    public mutating func handle(_ input: Input, now: Instant) {
        switch input {
        case .addBase(let base): addBase(base, now: now)
        case .addStream(let server, let local): addStream(server: server, local: local, now: now)
        case .streamClosed(let local, let reason): streamClosed(local: local, reason: reason, now: now)
        case .streamFailed(let server, let reason): streamFailed(server: server, reason: reason, now: now)
        case .endOfBases:
            basesEnded = true
            reportGatheringIfDone()
        case .datagram(let bytes, let from, let to):
            guard let i = entries.firstIndex(where: { $0.client.server.address == from && $0.base == to }) else { return }
            entries[i].client.handle(.received(bytes), now: now)
            drain(i)
        case .send(let bytes, let from, let to):
            guard let i = entries.firstIndex(where: { $0.relayed == from }) else { return }
            entries[i].client.handle(.send(to: to, bytes), now: now)
            drain(i)
        case .permit(let ip):
            for i in entries.indices where entries[i].client.relayedAddress?.ip.isIPv6 == ip.isIPv6 {
                entries[i].client.handle(.createPermission(ip), now: now)
                drain(i)
            }
        case .bindChannel(let relayed, let peer):
            guard let i = entries.firstIndex(where: { $0.relayed == relayed }) else { return }
            entries[i].client.handle(.bindChannel(peer: peer), now: now)
            drain(i)
        case .close:
            for i in entries.indices {
                entries[i].client.handle(.close, now: now)
                drain(i)
            }
        }
    }

    private mutating func addBase(_ base: SocketAddress, now: Instant) {
        guard !base.ip.isLoopback, !base.ip.isLinkLocal else { return }
        for (i, s) in servers.enumerated() where s.transport == .udp && s.address.ip.isIPv6 == base.ip.isIPv6
            && !entries.contains(where: { $0.index == i }) {
            start(i, base: base, now: now)
        }
    }

    private mutating func addStream(server: Int, local: SocketAddress, now: Instant) {
        guard servers.indices.contains(server), servers[server].transport.isStream,
              !entries.contains(where: { $0.index == server }) else { return }
        if let k = earlyCloses.firstIndex(where: { $0.local == local }) {
            // It already ended: the allocation fails at once with the connection's reason
            // (without this, the client would wait out its timeout for an answer that cannot come).
            streamFailed(server: server, reason: earlyCloses.remove(at: k).reason, now: now)
            return
        }
        start(server, base: local, now: now)
    }

    private mutating func streamClosed(local: SocketAddress, reason: String, now: Instant) {
        guard let i = entries.firstIndex(where: { $0.base == local && $0.client.server.transport.isStream }) else {
            if !earlyCloses.contains(where: { $0.local == local }) {
                if earlyCloses.count == Self.earlyClosesKept { earlyCloses.removeFirst() }
                earlyCloses.append((local, reason))
            }
            return
        }
        entries[i].client.handle(.connectionClosed(reason: reason), now: now)
        drain(i)
    }

    private mutating func streamFailed(server: Int, reason: String, now: Instant) {
        guard servers.indices.contains(server), !entries.contains(where: { $0.index == server }) else { return }
        let s = servers[server]
        // Never started, so nothing is sent; the entry only carries the failure (and counts for gathering).
        var c = TURNClient(server: s, timing: timing)
        c.handle(.connectionClosed(reason: reason), now: now)
        let nowhere = SocketAddress(s.address.ip.isIPv6 ? .v6(Array(repeating: 0, count: 16)) : .v4([0, 0, 0, 0]), 0)
        entries.append(Entry(client: c, index: server, base: nowhere))
        drain(entries.count - 1)
    }

    private mutating func start(_ index: Int, base: SocketAddress, now: Instant) {
        var c = TURNClient(server: servers[index], timing: timing)
        c.handle(.start, now: now)
        entries.append(Entry(client: c, index: index, base: base))
        drain(entries.count - 1)
    }

    /// Whether a datagram that arrived on `to` from `from` is for a TURN client: it comes
    /// from the server of an allocation made from that socket, and is TURN (ChannelData,
    /// or STUN other than Binding, which ICE's server-reflexive gathering owns). Everything
    /// on a stream connection is its client's (a slice may begin inside a frame).
    public func claims(_ bytes: [UInt8], from: SocketAddress, to: SocketAddress) -> Bool {
        guard let e = entries.first(where: { $0.client.server.address == from && $0.base == to }) else { return false }
        if e.client.server.transport.isStream { return true }
        switch PacketKind(classifying: bytes) {
        case .turnChannel: return true
        case .stun:
            guard bytes.count >= 2 else { return false }
            let type = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
            let method = (type & 0x3E00) >> 2 | (type & 0x00E0) >> 1 | (type & 0x000F)
            return method != StunMessage.bindingMethod
        default: return false
        }
    }

    /// Whether `address` is (or was) the relayed address of one of these allocations.
    public func isRelayed(_ address: SocketAddress) -> Bool {
        entries.contains { $0.relayed == address }
    }

    public mutating func handleTimeout(now: Instant) {
        for i in entries.indices {
            entries[i].client.handleTimeout(now: now)
            drain(i)
        }
    }

    public func nextDeadline() -> Instant? { entries.compactMap { $0.client.nextDeadline() }.min() }

    public mutating func poll() -> Output? { outputs.pop() }

    private mutating func drain(_ i: Int) {
        let base = entries[i].base
        let server = entries[i].client.server
        loop: while true {
            switch entries[i].client.poll() {
            case .transmit(let b)?:
                outputs.push(.transmit(Transmit(bytes: b, from: base, to: server.address)))
            case .event(let e)?:
                switch e {
                case .allocated(let relayed, let mapped, _):
                    entries[i].finishedGathering = true
                    entries[i].relayed = relayed
                    outputs.push(.allocated(server: server, index: entries[i].index, relayed: relayed, mapped: mapped))
                case .failed(let err):
                    entries[i].finishedGathering = true
                    outputs.push(.failed(server: server, err))
                case .data(let from, let bytes):
                    if let relayed = entries[i].client.relayedAddress {
                        outputs.push(.data(from: from, to: relayed, bytes))
                    }
                case .refreshed, .permissionInstalled, .permissionFailed, .channelBound, .closed:
                    break
                }
            case nil:
                break loop
            }
        }
        reportGatheringIfDone()
    }

    private mutating func reportGatheringIfDone() {
        guard basesEnded, !gatheringReported, !gathering else { return }
        gatheringReported = true
        outputs.push(.gatheringFinished)
    }
}
