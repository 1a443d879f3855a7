import CastCore

/// Spec §11: when the connection fails (ICE failed, or disconnected for more
/// than 5 s), re-offer after 1 s, 3 s, 7 s — at most three attempts — and give
/// up after that; a successful connection resets the count.
public struct ReconnectPolicy: Sendable, Equatable {
    /// spec §11: "Backoff between attempts is 1 s, 3 s, 7 s, for at most 3 attempts."
    public var delays: [Duration] = [.seconds(1), .seconds(3), .seconds(7)]
    /// spec §11: "…or .disconnected for more than 5 s".
    public var disconnectedGrace: Duration = .seconds(5)
    /// How long one offer may take to reach `connected` before it counts as failed.
    /// The receiver waits 30 s for a fresh offer (spec §11, receiver rules), so
    /// an attempt must be judged well within that.
    public var attemptTimeout: Duration = .seconds(20)

    public private(set) var attemptsUsed = 0

    public init() {}

    public init(delays: [Duration], disconnectedGrace: Duration, attemptTimeout: Duration) {
        self.delays = delays
        self.disconnectedGrace = disconnectedGrace
        self.attemptTimeout = attemptTimeout
    }

    public enum Decision: Equatable, Sendable {
        case retry(after: Duration, attempt: Int)
        case giveUp(attempts: Int)
    }

    /// The connection was lost: retry after the next delay, or give up.
    public mutating func connectionLost() -> Decision {
        guard attemptsUsed < delays.count else { return .giveUp(attempts: attemptsUsed) }
        let d = delays[attemptsUsed]
        attemptsUsed += 1
        return .retry(after: d, attempt: attemptsUsed)
    }

    /// spec §11: "A successful connection resets the counter."
    public mutating func connected() { attemptsUsed = 0 }
}
