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

/// Log lines to the systemd journal with a priority and the event as a field
/// (`CASTD_EVENT=`), used when systemd runs castd (JOURNAL_STREAM is set).
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

    public func write(_ line: LogLine) {
        guard line.level >= minimum else { return }
        let fields = ["MESSAGE=\(line.description)", "PRIORITY=\(Self.priority(line.level))",
                      "CASTD_EVENT=\(line.event)", "SYSLOG_IDENTIFIER=castd"]
        SystemdJournal.send(fields)
    }

    /// systemd sets JOURNAL_STREAM when stderr is connected to the journal.
    public static func isJournalStream(_ env: [String: String]) -> Bool { env["JOURNAL_STREAM"] != nil }
}
