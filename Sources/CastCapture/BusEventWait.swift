import CastCore
import CastSystemd

extension PortalBus {
    /// One turn of a D-Bus client's loop while its machine has nothing to call (the portal and
    /// Mutter clients): hands the machine the event already collected (`take`), or its timeout
    /// once its deadline has passed, or a failed bus connection (`failed`); otherwise dispatches
    /// what the bus has and sleeps on it until the deadline. Returns false when the machine has
    /// no deadline: it awaits nothing, and the loop is over.
    static func awaitEvent<Machine: SansIO>(_ machine: inout Machine, bus: SystemdBus, clock: some MonotonicClock,
                                            take: () -> Machine.Input?, failed: (String) -> Machine.Input) -> Bool {
        guard let due = machine.nextDeadline() else { return false }
        if let event = take() { machine.handle(event, now: clock.now()); return true }
        let now = clock.now()
        guard now < due else { machine.handleTimeout(now: now); return true }
        switch bus.process() {
        case .failed(let reason): machine.handle(failed("the session bus connection failed (\(reason))"), now: clock.now())
        case .progressed: break
        case .idle: bus.wait(timeout: due - now)
        }
        return true
    }
}
