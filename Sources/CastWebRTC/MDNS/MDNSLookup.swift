import CastCore

/// One pure one-shot resolution of a `.local` name (RFC 6762 §5.1): the query goes
/// out at once and again after `retransmitAfter`; the lookup ends with the first
/// response that names addresses, or empty-handed at `timeout`. The shell sends
/// `pollQuery()` to both multicast groups and feeds back unicast answers.
public struct MDNSLookup: Sendable {
    public let name: String
    public let id: UInt16
    public var retransmitAfter: Duration = .seconds(1)
    public var timeout: Duration = .seconds(3)
    public private(set) var result: [IPAddress]?
    private var started: Instant?
    private var sends = 0
    private var pending: [[UInt8]] = []
    private let query: [UInt8]

    /// `id` should be random (the shell draws it): a responder echoes it in one-shot answers.
    public init(name: String, id: UInt16) throws {
        self.name = name
        self.id = id
        self.query = try MDNS.query(for: name, id: id)
    }

    public var isDone: Bool { result != nil }

    public mutating func start(now: Instant) {
        guard started == nil else { return }
        started = now
        sends = 1
        pending.append(query)
    }

    /// A query datagram to multicast, if one is due.
    public mutating func pollQuery() -> [UInt8]? { pending.isEmpty ? nil : pending.removeFirst() }

    public func nextDeadline() -> Instant? {
        guard let s = started, result == nil else { return nil }
        return sends < 2 ? s + retransmitAfter : s + timeout
    }

    public mutating func handleTimeout(now: Instant) {
        guard let s = started, result == nil else { return }
        if now - s >= timeout {
            result = []
        } else if sends < 2, now - s >= retransmitAfter {
            sends = 2
            pending.append(query)
        }
    }

    /// A datagram received on the query socket. Malformed or unrelated messages are ignored.
    /// Returns true when it completed the lookup.
    @discardableResult
    public mutating func handle(datagram: [UInt8]) -> Bool {
        guard result == nil, let m = try? MDNSMessage(parsing: datagram), m.isResponse else { return false }
        let found = m.addresses(for: name)
        guard !found.isEmpty else { return false }
        result = found
        return true
    }
}
