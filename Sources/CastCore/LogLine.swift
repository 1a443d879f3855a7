/// One log event as one line of key=value fields (STYLE.md rule 5):
///   `event=negotiate negotiation=4f… attempt=1`
/// Values with spaces, quotes or `=` are quoted; control characters are
/// escaped so a remote string can never forge a second line. Secrets must be
/// passed as `Redacted`, which prints `<redacted>`.
public struct LogLine: Sendable, CustomStringConvertible {
    public enum Level: String, Sendable, Comparable {
        case debug, info, notice, warning, error
        var rank: Int { [.debug: 0, .info: 1, .notice: 2, .warning: 3, .error: 4][self]! }
        public static func < (a: Level, b: Level) -> Bool { a.rank < b.rank }
    }

    public var level: Level
    public var event: String
    public var fields: [(String, String)]

    public init(_ level: Level = .info, _ event: String, _ fields: [(String, CustomStringConvertible)] = []) {
        self.level = level
        self.event = event
        self.fields = fields.map { ($0.0, $0.1.description) }
    }

    public var description: String {
        var out = "level=\(level.rawValue) event=\(Self.quote(event))"
        for (k, v) in fields { out += " \(k)=\(Self.quote(v))" }
        return out
    }

    public static func quote(_ v: String) -> String {
        var needsQuotes = v.isEmpty
        var escaped = ""
        for u in v.unicodeScalars {
            switch u {
            case "\"": escaped += "\\\""; needsQuotes = true
            case "\\": escaped += "\\\\"; needsQuotes = true
            case "\n": escaped += "\\n"; needsQuotes = true
            case "\r": escaped += "\\r"; needsQuotes = true
            case "\t": escaped += "\\t"; needsQuotes = true
            case " ", "=": escaped.unicodeScalars.append(u); needsQuotes = true
            default:
                if u.value < 0x20 || u.value == 0x7f {
                    escaped += "\\x" + String(u.value, radix: 16)
                    needsQuotes = true
                } else {
                    escaped.unicodeScalars.append(u)
                }
            }
        }
        return needsQuotes ? "\"" + escaped + "\"" : escaped
    }
}

/// Where log lines go. The IO shell supplies stderr or the journal.
public protocol LogSink: Sendable {
    func write(_ line: LogLine)
}
