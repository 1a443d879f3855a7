import CastCore

/// The sender's outgoing signaling rows, in order, one insert in flight at a
/// time (so the receiver sees the offer before its candidates), within a
/// budget, and backing off on the backend's limits.
///
/// spec §6: a session accepts at most 200 rows a minute counting both sides
/// (SQLSTATE P0429 beyond that). castd keeps its own rows to `limit` per
/// `window` (by default half the session budget, leaving the rest to the
/// receiver) and, when the backend answers P0429 anyway, pauses with an
/// exponential backoff instead of spinning. A 54000 (payload over 64 KB) is a
/// castd bug: the row is dropped and reported, never retried.
public struct SignalingOutbox<Row: Sendable & Equatable>: Sendable {
    public var limit: Int
    public var window: Duration
    public var initialBackoff: Duration = .seconds(2)
    public var maxBackoff: Duration = .seconds(30)

    private var queue: [Row] = []
    private var inFlight: Row? = nil
    private var sentAt: [Instant] = []        // start times of inserts within the window
    private var pausedUntil: Instant? = nil
    private var backoff: Duration? = nil
    public private(set) var droppedAsTooLarge = 0
    public private(set) var rateLimitedAnswers = 0

    public init(limit: Int = 100, window: Duration = .seconds(60)) {
        self.limit = limit
        self.window = window
    }

    public var pendingCount: Int { queue.count + (inFlight == nil ? 0 : 1) }
    public var isIdle: Bool { queue.isEmpty && inFlight == nil }

    public mutating func enqueue(_ row: Row) { queue.append(row) }

    /// Drops every queued row that is not yet in flight (e.g. the candidates
    /// of a negotiation that was abandoned) for which `predicate` is true.
    public mutating func removeQueued(where predicate: (Row) -> Bool) { queue.removeAll(where: predicate) }

    private mutating func prune(_ now: Instant) {
        sentAt.removeAll { now - $0 >= window }
    }

    /// The next row to insert now, if the budget and any pause allow it.
    public mutating func next(now: Instant) -> Row? {
        prune(now)
        guard inFlight == nil, !queue.isEmpty else { return nil }
        if let p = pausedUntil, now < p { return nil }
        pausedUntil = nil
        guard sentAt.count < limit else { return nil }
        let row = queue.removeFirst()
        inFlight = row
        sentAt.append(now)
        return row
    }

    public enum Outcome: Equatable, Sendable {
        case inserted
        /// P0429: the session's row budget is spent; retry after the backoff.
        case rateLimited
        /// 54000: the payload is over 64 KB; a bug, never retried.
        case tooLarge
        /// Any other failure the caller decided not to retry (auth expired, gone).
        case dropped
        /// A transient failure (network, 5xx): retry after the backoff.
        case transient
    }

    public mutating func completed(_ outcome: Outcome, now: Instant) {
        guard let row = inFlight else { return }
        inFlight = nil
        switch outcome {
        case .inserted:
            backoff = nil
        case .tooLarge:
            droppedAsTooLarge += 1
        case .dropped:
            break
        case .rateLimited, .transient:
            if outcome == .rateLimited { rateLimitedAnswers += 1 }
            let b = backoff.map { min($0 * 2, maxBackoff) } ?? initialBackoff
            backoff = b
            pausedUntil = now + b
            queue.insert(row, at: 0)
        }
    }

    /// When `next(now:)` may next return a row, if something is waiting.
    public func nextDeadline() -> Instant? {
        guard inFlight == nil, !queue.isEmpty else { return nil }
        var t: Instant? = pausedUntil
        if sentAt.count >= limit, let oldest = sentAt.first {
            let freeAt = oldest + window
            t = max(t ?? freeAt, freeAt)
        }
        return t
    }
}
