import CastCore
import CastSystem
#if canImport(Glibc)
import Glibc
#endif

/// `castd stop [<session id>]`: ends a running cast the way SIGTERM does (disconnect row,
/// session `end`, exit 0), by signalling the pid the runtime registry names once /proc
/// confirms it is castd serving that session, then waiting for it to exit.
enum StopCommand {
    /// What to do, decided from the request and the live entries.
    enum Plan: Equatable {
        case signal(RuntimeEntry)
        case noneRunning
        case notRunning(String)
        case ambiguous([RuntimeEntry])
    }

    static func plan(requested: String?, live: [RuntimeEntry]) -> Plan {
        if let id = requested {
            return live.first { $0.sessionId == id.lowercased() }.map(Plan.signal) ?? .notRunning(id.lowercased())
        }
        switch live.count {
        case 0: return .noneRunning
        case 1: return .signal(live[0])
        default: return .ambiguous(live)
        }
    }

    /// castd's own clean stop takes at most 2 s (the end rows' budget) plus the end notice's 1 s.
    static let exitWait: Duration = .seconds(6)

    static func run(_ o: StopOptions, environment: [String: String]) async -> Int32 {
        let r = Reporter(json: o.common.json)
        let store = RuntimeRegistryStore(environment: environment)
        switch plan(requested: o.sessionId, live: store.live()) {
        case .noneRunning:
            return r.fail("No cast is running (castd status lists running casts).", code: "none_running")
        case .notRunning(let id):
            return r.fail("No cast of session \(id) is running; castd status lists the running ones.", code: "not_running")
        case .ambiguous(let entries):
            let list = entries.map { "\($0.sessionId) (\($0.sharing))" }.joined(separator: ", ")
            _ = r.fail("\(entries.count) casts are running: \(list). Say which: castd stop <session id>.", code: "ambiguous")
            return CLI.ExitCode.usage
        case .signal(let e):
            // Checked again right before the signal: the entry was judged a moment ago.
            guard RuntimeRegistry.staleReason(e, ProcFS.state(e.pid)) == nil else {
                r.say("stopped", "The cast of session \(e.sessionId) had already ended.", ["sessionId": e.sessionId])
                return CLI.ExitCode.ok
            }
            guard kill(e.pid, SIGTERM) == 0 else {
                let why = CastError.posixReason(errno)
                return r.fail("Could not stop the cast of session \(e.sessionId) (pid \(e.pid)): \(why).", code: "signal_failed")
            }
            let clock = ContinuousClock()
            let deadline = clock.now + exitWait
            while clock.now < deadline {
                if ProcFS.state(e.pid) == .gone {
                    r.say("stopped", "Stopped the cast of session \(e.sessionId); the receiver was told it ended.",
                          ["sessionId": e.sessionId])
                    return CLI.ExitCode.ok
                }
                try? await Task.sleep(for: .milliseconds(20))
            }
            return r.fail("The cast of session \(e.sessionId) (pid \(e.pid)) was asked to stop but is still running after \(exitWait.components.seconds) s; run castd stop again to end it at once.", code: "still_running")
        }
    }
}
