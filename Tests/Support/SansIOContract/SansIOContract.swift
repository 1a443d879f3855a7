import CastCore

/// The one sans-IO contract (`SansIO` in CastCore) checked the same way for every conforming
/// type, from that type's own test module: `#expect(SansIOContract.violations(…).isEmpty)`.
///
/// The check replays a scenario (the inputs, each at its instant) on fresh machines from
/// `make`, so each timing of the timeout starts from the same state, and answers what it found
/// broken, one sentence each (empty: the contract holds):
/// - outputs come out in decision order: draining after every input gives the same outputs,
///   in the same order, as draining once after all of them (unless `queuesAcrossInputs` is
///   false: a type that decides when polled, after the owner reported on the last output), and
///   `expected` (if given) is exactly what the scenario gives;
/// - a drained queue answers nil, and again nil;
/// - `nextDeadline()` is asked after draining, and must name an instant (the scenario ends with
///   a timer armed) unless `expectsDeadline` is false;
/// - `handleTimeout` at that deadline gives the on-time outputs; early (`early` before it) it
///   gives none that the on-time call would not give; twice at the deadline, the second call
///   adds none that the single on-time call would not give; late (`late` after it) it does not
///   crash and drains to nil.
/// Outputs are compared by `same` (their printed form unless told), so any `Output` type fits.
public enum SansIOContract {
    public static func violations<M: SansIO>(
        _ make: () -> M,
        inputs: [(M.Input, Instant)],
        expected: [M.Output]? = nil,
        expectsDeadline: Bool = true,
        queuesAcrossInputs: Bool = true,
        early: Duration = .milliseconds(1),
        late: Duration = .seconds(1),
        same: (M.Output, M.Output) -> Bool = { String(reflecting: $0) == String(reflecting: $1) }
    ) -> [String] {
        var found: [String] = []
        func text(_ os: [M.Output]) -> String { "[" + os.map { String(reflecting: $0) }.joined(separator: ", ") + "]" }
        func equal(_ a: [M.Output], _ b: [M.Output]) -> Bool { a.count == b.count && zip(a, b).allSatisfy(same) }
        /// Whether every output of `a` is one of `b`'s, each of `b`'s used once (a sub-multiset).
        func within(_ a: [M.Output], _ b: [M.Output]) -> Bool {
            var left = b
            for o in a {
                guard let i = left.firstIndex(where: { same(o, $0) }) else { return false }
                left.remove(at: i)
            }
            return true
        }
        func drain(_ m: inout M, _ what: String) -> [M.Output] {
            var out: [M.Output] = []
            while let o = m.poll() {
                out.append(o)
                if out.count > 100_000 { found.append("\(what): poll() never answers nil"); return out }
            }
            if m.poll() != nil { found.append("\(what): a drained queue answered an output the second time") }
            return out
        }

        // Decision order: drained after each input, and drained once at the end.
        var stepwise = make()
        var perInput: [M.Output] = drain(&stepwise, "before any input")
        for (input, now) in inputs {
            stepwise.handle(input, now: now)
            perInput += drain(&stepwise, "after an input at \(now)")
        }
        var batched = make()
        for (input, now) in inputs { batched.handle(input, now: now) }
        let atOnce = drain(&batched, "after all the inputs")
        if queuesAcrossInputs, !equal(perInput, atOnce) {
            found.append("drained after each input \(text(perInput)), but once at the end \(text(atOnce))")
        }
        if let expected, !equal(perInput, expected) {
            found.append("outputs \(text(perInput)), expected \(text(expected))")
        }

        // The deadline, asked after draining; both replays agree on it.
        let deadline = stepwise.nextDeadline()
        if queuesAcrossInputs, batched.nextDeadline() != deadline {
            found.append("deadline \(String(describing: deadline)) drained stepwise, \(String(describing: batched.nextDeadline())) drained at once")
        }
        guard let due = deadline else {
            if expectsDeadline { found.append("no deadline after the scenario") }
            return found
        }

        /// A fresh machine driven through the scenario as its owner would: drained after each input.
        func replay() -> M {
            var m = make()
            _ = drain(&m, "replay")
            for (input, now) in inputs {
                m.handle(input, now: now)
                _ = drain(&m, "replay")
            }
            return m
        }

        var onTime = replay()
        onTime.handleTimeout(now: due)
        let onTimeOut = drain(&onTime, "after the timeout at the deadline")

        var earlier = replay()
        earlier.handleTimeout(now: due - early)
        let earlyOut = drain(&earlier, "after an early timeout")
        if !within(earlyOut, onTimeOut) {
            found.append("an early timeout gave \(text(earlyOut)), not within the on-time \(text(onTimeOut))")
        }

        var twice = replay()
        twice.handleTimeout(now: due)
        var twiceOut = drain(&twice, "after the first of two timeouts")
        twice.handleTimeout(now: due)
        twiceOut += drain(&twice, "after the second of two timeouts")
        if !within(twiceOut, onTimeOut) {
            found.append("two timeouts at the deadline gave \(text(twiceOut)), not within one's \(text(onTimeOut))")
        }

        var later = replay()
        later.handleTimeout(now: due + late)
        _ = drain(&later, "after a late timeout")
        later.handleTimeout(now: due + late)
        _ = drain(&later, "after a late timeout, twice")
        return found
    }
}
