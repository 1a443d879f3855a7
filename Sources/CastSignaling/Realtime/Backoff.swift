/// The official Realtime client delays (docs/contract.md, wire C): socket
/// reconnect 1, 2, 5, 10, 10… s; channel rejoin 1, 2, 5, then 10 s.
public struct Backoff: Sendable, Equatable {
    public let steps: [Duration]
    public private(set) var attempts = 0

    public init(steps: [Duration]) {
        precondition(!steps.isEmpty)
        self.steps = steps
    }

    public static var socketReconnect: Backoff { Backoff(steps: [.seconds(1), .seconds(2), .seconds(5), .seconds(10)]) }
    public static var channelRejoin: Backoff { Backoff(steps: [.seconds(1), .seconds(2), .seconds(5), .seconds(10)]) }

    /// The next delay; the last step repeats forever.
    public mutating func next() -> Duration {
        defer { attempts += 1 }
        return steps[min(attempts, steps.count - 1)]
    }

    public mutating func reset() { attempts = 0 }
}
