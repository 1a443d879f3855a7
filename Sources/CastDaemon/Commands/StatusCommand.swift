import CastCore

/// `castd status`: the casts running on this machine for this user, from the runtime
/// registry (stale entries pruned on the way). Exit 0, with or without casts.
enum StatusCommand {
    static func run(_ o: StatusOptions, environment: [String: String]) -> Int32 {
        let entries = RuntimeRegistryStore(environment: environment).live()
        var out = StandardStream.out
        if o.common.json {
            let casts: [[String: Any]] = entries.map(json)
            if let line = JSONLine.encode(["casts": casts]) { out.writeLine(line) }
        } else {
            for line in text(entries) { out.writeLine(line) }
        }
        return CLI.ExitCode.ok
    }

    static func json(_ e: RuntimeEntry) -> [String: Any] {
        ["pid": Int(e.pid), "sessionId": e.sessionId, "startedAt": e.startedAt, "state": e.state,
         "sharing": e.sharing, "audio": e.audio, "version": e.version]
    }

    /// One sentence per cast, or one saying there is none.
    static func text(_ entries: [RuntimeEntry]) -> [String] {
        guard !entries.isEmpty else { return ["No cast is running."] }
        return entries.map { "Session \($0.sessionId): \(describe($0))" }
    }

    /// "casting screen :0 (XShm) and desktop audio since 2026-12-06T04:01:02Z (pid 4242)."
    static func describe(_ e: RuntimeEntry) -> String {
        let state = switch e.state {
        case "casting": "casting"
        case "waiting_for_approval": "waiting for the receiver to approve"
        case "negotiating": "connecting to the receiver"
        case "reconnecting": "reconnecting to the receiver"
        case "restarting_media": "restarting capture"
        case "starting": "starting"
        case "ending": "ending"
        default: e.state
        }
        let what = e.audio ? "\(e.sharing) and desktop audio" : e.sharing
        return "\(state), sharing \(what), since \(e.startedAt) (pid \(e.pid))."
    }
}
