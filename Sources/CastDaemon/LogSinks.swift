import CastCore
import CastSystemd

#if canImport(Glibc)
import Glibc
#endif

/// Log lines to stderr, one per event, below a minimum level.
public struct StderrLogSink: LogSink {
    public var minimum: LogLine.Level
    public init(minimum: LogLine.Level = .info) { self.minimum = minimum }
    public func write(_ line: LogLine) {
        guard line.level >= minimum else { return }
        var err = StandardStream.err
        err.writeLine(line.description)
    }
}

/// Log lines to the systemd journal, used when systemd runs castd (JOURNAL_STREAM is set).
/// One journal entry per event: `MESSAGE=` the whole line as stderr would show it,
/// `PRIORITY=` from the level, `CASTD_EVENT=`, `CASTD_LEVEL=`, and one `CASTD_<KEY>=` field
/// per key of the event, so `journalctl CASTD_EVENT=connected` or
/// `journalctl CASTD_NEGOTIATION=4f2a` selects by field (see `fields(for:)`).
public struct JournalLogSink: LogSink {
    public var minimum: LogLine.Level
    public init(minimum: LogLine.Level = .info) { self.minimum = minimum }

    static func priority(_ l: LogLine.Level) -> Int {
        switch l {   // syslog(3) priorities
        case .debug: return 7
        case .info: return 6
        case .notice: return 5
        case .warning: return 4
        case .error: return 3
        }
    }

    /// journald accepts field names of at most 64 characters from `[A-Z0-9_]`, not starting
    /// with `_` (those are the trusted fields journald adds itself): systemd.journal-fields(7).
    static let maxFieldName = 64

    /// The journal field name of a key: `CASTD_` + the key upper-cased, every character
    /// outside `[A-Z0-9_]` replaced by `_`, cut at 64 characters.
    public static func fieldName(_ key: String) -> String {
        let upper = key.uppercased().unicodeScalars.map { u -> Character in
            switch u {
            case "A"..."Z", "0"..."9", "_": return Character(u)
            default: return "_"
            }
        }
        return String(("CASTD_" + String(upper)).prefix(maxFieldName))
    }

    /// The entry for one event, as `NAME=value` strings for sd_journal_sendv. Values keep
    /// their text with control characters escaped (as in the line, without the quotes). A key
    /// whose field name is already taken (by `CASTD_EVENT`, `CASTD_LEVEL` or an earlier key)
    /// is left to MESSAGE alone: the first one wins, none is overwritten.
    public static func fields(for line: LogLine) -> [String] {
        var out = ["MESSAGE=\(line.description)", "PRIORITY=\(priority(line.level))", "SYSLOG_IDENTIFIER=castd",
                   "CASTD_EVENT=\(LogLine.escapeControls(line.event))", "CASTD_LEVEL=\(line.level.rawValue)"]
        var taken: Set<String> = ["CASTD_EVENT", "CASTD_LEVEL"]
        for (k, v) in line.fields {
            let name = fieldName(k)
            guard taken.insert(name).inserted else { continue }
            out.append("\(name)=\(LogLine.escapeControls(v))")
        }
        return out
    }

    public func write(_ line: LogLine) {
        guard line.level >= minimum else { return }
        SystemdJournal.send(Self.fields(for: line))
    }

    /// systemd sets JOURNAL_STREAM when stderr is connected to the journal.
    public static func isJournalStream(_ env: [String: String]) -> Bool { env["JOURNAL_STREAM"] != nil }
}
