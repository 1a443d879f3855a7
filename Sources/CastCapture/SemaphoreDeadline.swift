import CastCore
import CastSystem
import Dispatch

extension DispatchSemaphore {
    /// Waits for a signal until `deadline` on the IO shell's one clock
    /// (`SystemMonotonicClock`, or the clock a source was given). DispatchSemaphore
    /// only takes a DispatchTime, so the time still left is handed to it relative
    /// to its own "now" here, and nowhere else: deadlines in castd are `Instant`s.
    func wait(until deadline: Instant, clock: any MonotonicClock = SystemMonotonicClock()) -> DispatchTimeoutResult {
        let left = max(0, (deadline - clock.now()).totalNanoseconds)
        return wait(timeout: .now() + .nanoseconds(Int(clamping: left)))
    }
}
