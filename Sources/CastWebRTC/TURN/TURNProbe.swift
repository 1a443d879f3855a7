import CastCore

/// `castd doctor --turn` as a pure core: one allocation on every TURN server (over UDP from
/// the shell's sockets, over TCP/TLS on the connections the shell opens), each result with
/// the time it took, then every allocation released (Refresh with LIFETIME 0, RFC 8656 §8).
/// Nothing is relayed.
///
/// Contract (the one `SansIO` contract, as `DatagramCore`): after `start` and every
/// `handle(_:now:)` the owner sends what `poll()` gives until nil, and calls
/// `handleTimeout(now:)` at `nextDeadline()`.
/// `finished` turns true once every server has answered, failed or timed out.
public struct TURNProbe: Sendable {
    public enum Outcome: Sendable, Equatable {
        case allocated(relayed: SocketAddress, mapped: SocketAddress?, after: Duration)
        case failed(CastError, after: Duration)
    }

    public let servers: [TURNServer]
    /// By server index; a server without an entry has not finished.
    public private(set) var outcomes: [Int: Outcome] = [:]
    public private(set) var finished = false
    private var relays: TURNRelays
    private var started: Instant? = nil
    private var outputs = OutputQueue<DatagramOutput<Never>>()

    public init(servers: [TURNServer], timing: TURNTiming = TURNProbe.timing) {
        self.servers = servers
        relays = TURNRelays(servers: servers, timing: timing)
    }

    /// A doctor should not take the 39.5 s of RFC 8489 §6.2.1 to call a server silent:
    /// 4 sends (at 0, 0.5, 1.5 and 3.5 s) and 8 s more over UDP, 10 s over TCP/TLS.
    public static var timing: TURNTiming {
        var t = TURNTiming()
        t.maxTransmissions = 4
        t.reliableTimeout = .seconds(10)
        return t
    }

    /// The shell's UDP sockets (one per address family the UDP servers need).
    public mutating func start(udpBases: [SocketAddress], streams: [(server: Int, local: SocketAddress)],
                               streamFailures: [(server: Int, reason: String)], now: Instant) {
        started = now
        for s in streams { relays.handle(.addStream(server: s.server, local: s.local), now: now) }
        for f in streamFailures { relays.handle(.streamFailed(server: f.server, reason: f.reason), now: now) }
        for b in udpBases { relays.handle(.addBase(b), now: now) }
        // A UDP server of a family no socket was given for never starts: say so.
        for (i, s) in servers.enumerated() where s.transport == .udp && !udpBases.contains(where: { $0.ip.isIPv6 == s.address.ip.isIPv6 }) {
            outcomes[i] = .failed(CastError(.turnConnection, "TURN server \(s.name): no UDP socket of its address family (\(s.address.ip.isIPv6 ? "IPv6" : "IPv4")) could be opened here"),
                                  after: .zero)
        }
        relays.handle(.endOfBases, now: now)
        drain(now: now)
    }

    private mutating func drain(now: Instant) {
        let elapsed = started.map { now - $0 } ?? .zero
        loop: while true {
            switch relays.poll() {
            case .transmit(let t)?:
                outputs.push(.transmit(t))
            case .allocated(_, let index, let relayed, let mapped)?:
                if outcomes[index] == nil { outcomes[index] = .allocated(relayed: relayed, mapped: mapped, after: elapsed) }
            case .failed(let server, let error)?:
                // A failure after the allocation (the connection closing on release) changes nothing.
                if let i = servers.firstIndex(of: server), outcomes[i] == nil { outcomes[i] = .failed(error, after: elapsed) }
            case .data?:
                break
            case .gatheringFinished?:
                // Every server answered: release what was allocated; the probe is over
                // (an unanswered release just expires on the server).
                relays.handle(.close, now: now)
                finished = true
            case nil:
                break loop
            }
        }
    }
}

extension TURNProbe: DatagramCore {
    /// A probe has no events: its outcomes are read from `outcomes` once `finished`.
    public typealias Event = Never

    public mutating func handle(_ input: DatagramInput, now: Instant) {
        switch input {
        case .datagram(let bytes, let from, let to):
            guard relays.claims(bytes, from: from, to: to) else { return }
            relays.handle(.datagram(bytes, from: from, to: to), now: now)
        case .socketClosed(let local, let reason):
            relays.handle(.streamClosed(local: local, reason: reason), now: now)
        }
        drain(now: now)
    }

    public mutating func handleTimeout(now: Instant) {
        relays.handleTimeout(now: now)
        drain(now: now)
    }

    public mutating func poll() -> DatagramOutput<Never>? { outputs.pop() }

    public func nextDeadline() -> Instant? { finished ? nil : relays.nextDeadline() }
}
