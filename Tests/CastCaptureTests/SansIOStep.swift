import CastCore
import Testing

/// The capture machines answer at most one action per input; these drive them one step at a
/// time under the `SansIO` contract and check that nothing else was queued.
extension SansIO {
    /// One input at `now`, then the output it decided, if any.
    mutating func step(_ input: Input, now: Instant = .zero) -> Output? {
        handle(input, now: now)
        return takeOne()
    }

    /// The machine's wait running out: a timeout at its deadline (with none, nothing is due).
    mutating func timeout() -> Output? {
        handleTimeout(now: nextDeadline() ?? .zero)
        return takeOne()
    }

    private mutating func takeOne() -> Output? {
        let output = poll()
        #expect(poll() == nil)
        return output
    }
}
