import CastCore

/// Resolves the `<uuid>.local` names of remote host candidates by multicast DNS
/// (RFC 6762), as a pure state machine that keeps the one `SansIO` contract:
///
/// - inputs: `handle(.resolve(name) / .giveUp(name) / .datagram(bytes), now:)`, and
///   `handleTimeout(now:)` at `nextDeadline()`;
/// - outputs: `poll()` until nil, in decision order: `.query(bytes)` (a datagram for the
///   shell to multicast to every group on every interface) and `.event(Event)`.
///
/// It listens as well as asks: every address record in any response it hears —
/// answers to its queries, other hosts' answers, and unsolicited announcements
/// (§8.3) — is cached for its TTL. That matters because Chromium announces the
/// name of each hidden host candidate when it creates it, before the candidate
/// is even signalled, and (seen in this container) may never answer a query.
///
/// Queries go out from port 5353 as QM questions with id 0 (§5.2, §18.1), so
/// responders multicast their answers, which every listener on the port
/// receives; a QU (unicast) answer to a shared port 5353 could land in another
/// process's socket.
public struct MDNSResolver: Sendable, SansIO {
    public enum Input: Sendable, Equatable {
        /// Ask for `name`'s addresses. A fresh cached answer (an announcement heard
        /// earlier) resolves it at once; otherwise a query goes out now.
        case resolve(String)
        /// Give `name` up at once (the shell has no mDNS socket): ICE stops waiting for it.
        case giveUp(String)
        /// A datagram received on port 5353. Queries (our own, looped back, and other
        /// hosts') and malformed messages change nothing.
        case datagram([UInt8])
    }

    public enum Output: Sendable, Equatable {
        /// A query to multicast to every group on every interface.
        case query([UInt8])
        case event(Event)
    }

    public struct Configuration: Sendable {
        /// Delays from the first query to each retransmission (§5.2: at least 1 s, then doubling).
        public var retransmissions: [Duration] = [.seconds(1), .seconds(3)]
        /// From the first query to giving up.
        public var timeout: Duration = .seconds(5)
        /// Bounds whatever the network sends: names being looked up, names cached.
        public var maxPending = 16
        public var maxCached = 64
        /// §10: TTLs above this are capped (a cached address can go stale).
        public var maxTTL: Duration = .seconds(3600)
        public init() {}
    }

    public enum Event: Sendable, Equatable {
        /// The addresses for a name asked with `resolve`: from what was heard before it
        /// was asked (`fromCache`: an announcement, or another host's answer), or from a
        /// response heard while the query was out.
        case resolved(name: String, addresses: [IPAddress], fromCache: Bool)
        /// No answer by the timeout (or the name cannot be queried).
        case unresolved(name: String)
    }

    struct CachedAddress: Sendable {
        var ip: IPAddress
        var type: UInt16
        var received: Instant
        var expires: Instant
    }

    struct Lookup: Sendable {
        var name: String            // as asked (events echo it)
        var query: [UInt8]
        var started: Instant
        var sent: Int               // retransmissions done so far
        var order: UInt64           // when it was asked among the others: outputs keep that order
    }

    public let configuration: Configuration
    /// Responses that did not parse (counted and dropped).
    public private(set) var malformed = 0
    private var cache: [String: [CachedAddress]] = [:]   // canonical name → addresses
    private var lookups: [String: Lookup] = [:]           // canonical name → lookup
    private var asked: UInt64 = 0
    /// The lookups in the order they were asked (names asked at one instant keep their order,
    /// which a dictionary's does not).
    private var lookupsInOrder: [(key: String, value: Lookup)] { lookups.sorted { $0.value.order < $1.value.order } }
    private var outputs = OutputQueue<Output>()

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    public var pendingNames: Int { lookups.count }

    // MARK: Inputs

    public mutating func handle(_ input: Input, now: Instant) {
        switch input {
        case .resolve(let name): resolve(name, now: now)
        case .giveUp(let name): outputs.push(.event(.unresolved(name: name)))
        case .datagram(let bytes): handle(datagram: bytes, now: now)
        }
    }

    private mutating func resolve(_ name: String, now: Instant) {
        let key = MDNSMessage.canonical(name)
        if let hit = addresses(for: key, now: now), !hit.isEmpty {
            outputs.push(.event(.resolved(name: name, addresses: hit, fromCache: true)))
            return
        }
        guard lookups[key] == nil else { return }
        guard lookups.count < configuration.maxPending, let q = try? MDNS.query(for: name, id: 0, unicastResponse: false) else {
            outputs.push(.event(.unresolved(name: name)))
            return
        }
        lookups[key] = Lookup(name: name, query: q, started: now, sent: 0, order: asked)
        asked += 1
        outputs.push(.query(q))
    }

    private mutating func handle(datagram: [UInt8], now: Instant) {
        let m: MDNSMessage
        do { m = try MDNSMessage(parsing: datagram) } catch { malformed += 1; return }
        guard m.isResponse else { return }
        for rec in m.records where rec.recordClass == MDNS.classIN {
            guard case .address(let ip) = rec.data else { continue }
            learn(MDNSMessage.canonical(rec.name), ip: ip, type: rec.type, ttl: rec.ttl, cacheFlush: rec.cacheFlush, now: now)
        }
        for (key, l) in lookupsInOrder {
            if let hit = addresses(for: key, now: now), !hit.isEmpty {
                lookups[key] = nil
                outputs.push(.event(.resolved(name: l.name, addresses: hit, fromCache: false)))
            }
        }
    }

    public mutating func handleTimeout(now: Instant) {
        for (key, l) in lookupsInOrder {
            if now - l.started >= configuration.timeout {
                lookups[key] = nil
                outputs.push(.event(.unresolved(name: l.name)))
            } else if l.sent < configuration.retransmissions.count, now - l.started >= configuration.retransmissions[l.sent] {
                lookups[key]?.sent += 1
                outputs.push(.query(l.query))
            }
        }
    }

    // MARK: Outputs

    public mutating func poll() -> Output? { outputs.pop() }

    public func nextDeadline() -> Instant? {
        lookups.values.map { l in
            l.sent < configuration.retransmissions.count
                ? l.started + min(configuration.retransmissions[l.sent], configuration.timeout)
                : l.started + configuration.timeout
        }.min()
    }

    /// The unexpired cached addresses for a name, nil when none was ever heard.
    public func cached(_ name: String, now: Instant) -> [IPAddress]? {
        addresses(for: MDNSMessage.canonical(name), now: now)
    }

    // MARK: Cache

    private func addresses(for key: String, now: Instant) -> [IPAddress]? {
        guard let entries = cache[key] else { return nil }
        return entries.filter { $0.expires > now }.map(\.ip)
    }

    private mutating func learn(_ key: String, ip: IPAddress, type: UInt16, ttl: UInt32, cacheFlush: Bool, now: Instant) {
        var entries = (cache[key] ?? []).filter { $0.expires > now }
        if ttl == 0 {
            // §10.1: a goodbye; the record leaves the cache (after a second, which for
            // a one-shot resolver is the same as now).
            entries.removeAll { $0.ip == ip }
        } else {
            if cacheFlush {
                // §10.2: this record set replaces what was heard more than a second ago.
                entries.removeAll { $0.type == type && now - $0.received > .seconds(1) }
            }
            let life = min(Duration.seconds(Int64(ttl)), configuration.maxTTL)
            entries.removeAll { $0.ip == ip }
            entries.append(CachedAddress(ip: ip, type: type, received: now, expires: now + life))
        }
        cache[key] = entries.isEmpty ? nil : entries
        evict(now: now, keeping: key)
    }

    /// Keeps the cache bounded: expired names go first, then the ones that expire soonest.
    private mutating func evict(now: Instant, keeping: String) {
        guard cache.count > configuration.maxCached else { return }
        cache = cache.filter { $0.key == keeping || $0.value.contains { $0.expires > now } }
        while cache.count > configuration.maxCached {
            guard let victim = cache.filter({ $0.key != keeping })
                .min(by: { ($0.value.map(\.expires).max() ?? now) < ($1.value.map(\.expires).max() ?? now) })?.key else { break }
            cache[victim] = nil
        }
    }
}
