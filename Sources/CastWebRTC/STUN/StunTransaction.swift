import CastCore

/// How a STUN request over UDP is retransmitted (RFC 8489 §6.2.1): sent, then again after
/// RTO, 2·RTO, 4·RTO, … (each wait capped at `maxRTO` when there is one) until
/// `maxTransmissions` were sent; after the last, the transaction waits `lastWait` (Rm·RTO in
/// the RFC; the next RTO when nil) and then gives up. Over TCP/TLS (§6.2.2) a request is sent
/// once and given up after Ti: `reliable(timeout:)`.
public struct StunRetransmission: Sendable, Equatable {
    public var initialRTO: Duration
    public var maxRTO: Duration?
    public var maxTransmissions: Int
    public var lastWait: Duration?

    public init(initialRTO: Duration, maxRTO: Duration? = nil, maxTransmissions: Int, lastWait: Duration? = nil) {
        self.initialRTO = initialRTO
        self.maxRTO = maxRTO
        self.maxTransmissions = maxTransmissions
        self.lastWait = lastWait
    }

    /// RFC 8489 §6.2.2: over a reliable transport, one transmission and `timeout` (Ti) to answer.
    public static func reliable(timeout: Duration) -> StunRetransmission {
        StunRetransmission(initialRTO: timeout, maxTransmissions: 1, lastWait: timeout)
    }
}

/// One STUN request in flight: its bytes, how often it was sent and when it must be sent
/// again or given up. A pure value (docs/architecture.md, "One sans-IO contract"): time comes
/// in as `now`, and the owner sends what it is told to.
public struct StunTransaction: Sendable {
    public let id: StunTransactionID
    public let request: [UInt8]
    public let schedule: StunRetransmission
    public private(set) var transmissions: Int
    /// When `handleTimeout(now:)` has something to do: retransmit, or give up.
    public private(set) var deadline: Instant
    /// The wait after the latest transmission.
    private var rto: Duration

    /// The first transmission is counted here; the owner sends `request` now.
    public init(id: StunTransactionID, request: [UInt8], schedule: StunRetransmission, now: Instant) {
        self.id = id
        self.request = request
        self.schedule = schedule
        self.transmissions = 1
        self.rto = schedule.initialRTO
        self.deadline = now
        self.deadline = now + wait
    }

    public enum Step: Sendable, Equatable {
        /// Send `request` again (one more transmission is counted).
        case retransmit
        /// No answer after the last transmission and its wait: the transaction is over.
        case timedOut
    }

    /// nil before `deadline` (an early call changes nothing).
    public mutating func handleTimeout(now: Instant) -> Step? {
        guard deadline <= now else { return nil }
        guard transmissions < schedule.maxTransmissions else { return .timedOut }
        transmissions += 1
        rto = rto * 2
        if let cap = schedule.maxRTO { rto = min(rto, cap) }
        deadline = now + wait
        return .retransmit
    }

    private var wait: Duration {
        transmissions >= schedule.maxTransmissions ? (schedule.lastWait ?? rto) : rto
    }
}

/// The STUN requests a component has in flight, by transaction id, each with the owner's
/// `Context` (what the request was for). ICE's checks and gathering and TURN's requests
/// run here: a response is matched by its transaction id (`context(for:)`, then `finish`; a
/// second response to a finished transaction matches nothing), and the owner's
/// `handleTimeout` drains `nextDue(now:)` for what to retransmit and what timed out.
public struct StunTransactions<Context: Sendable>: Sendable {
    private struct Entry: Sendable {
        var transaction: StunTransaction
        var context: Context
    }

    private var pending: [StunTransactionID: Entry] = [:]

    public init() {}

    public var isEmpty: Bool { pending.isEmpty }
    public var count: Int { pending.count }

    /// Starts a transaction; the owner sends `request` now (the first transmission).
    public mutating func start(_ id: StunTransactionID, request: [UInt8], context: Context,
                               schedule: StunRetransmission, now: Instant) {
        pending[id] = Entry(transaction: StunTransaction(id: id, request: request, schedule: schedule, now: now),
                            context: context)
    }

    /// The context of the transaction a response names, nil when none is pending (never sent
    /// by us, timed out, or already answered).
    public func context(for id: StunTransactionID) -> Context? { pending[id]?.context }

    /// Ends the transaction (its response was accepted); nil when none was pending.
    @discardableResult
    public mutating func finish(_ id: StunTransactionID) -> Context? { pending.removeValue(forKey: id)?.context }

    public mutating func removeAll() { pending.removeAll() }

    public mutating func removeAll(where drop: (Context) -> Bool) {
        pending = pending.filter { !drop($0.value.context) }
    }

    public func contains(where match: (Context) -> Bool) -> Bool {
        pending.values.contains { match($0.context) }
    }

    /// The earliest deadline of any transaction; nil when none is pending.
    public var nextDeadline: Instant? {
        var d: Instant? = nil
        for e in pending.values {
            if let x = d, x <= e.transaction.deadline { continue }
            d = e.transaction.deadline
        }
        return d
    }

    public enum Due: Sendable {
        /// Send `request` again.
        case retransmit(request: [UInt8], context: Context)
        /// Given up after `transmissions` sends; the transaction is removed.
        case timedOut(context: Context, transmissions: Int)
    }

    /// The earliest transaction due at `now`, stepped: retransmitted (its deadline moves past
    /// `now`) or timed out (removed). nil when none is due, so `while let` drains them all,
    /// and the owner may start or drop transactions between steps.
    public mutating func nextDue(now: Instant) -> Due? {
        var earliest: Entry? = nil
        for e in pending.values where e.transaction.deadline <= now {
            if let x = earliest, x.transaction.deadline <= e.transaction.deadline { continue }
            earliest = e
        }
        guard var e = earliest else { return nil }
        let id = e.transaction.id
        switch e.transaction.handleTimeout(now: now) {
        case .retransmit:
            pending[id] = e
            return .retransmit(request: e.transaction.request, context: e.context)
        case .timedOut:
            pending[id] = nil
            return .timedOut(context: e.context, transmissions: e.transaction.transmissions)
        case nil:
            return nil
        }
    }
}
