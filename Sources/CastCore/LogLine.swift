/// One log event as one line of key=value fields (rule 5, docs/architecture.md):
///   `level=info event=negotiate negotiation=4f… attempt=1`
/// Every component emits these typed events (its own event name, its own fields, a level
/// chosen per event); the IO shell writes them as they are, to stderr or to the journal
/// (one journal field per key). Values with spaces, quotes or `=` are quoted; control
/// characters (C0, DEL, C1) and the Unicode line and paragraph separators are escaped, so a
/// remote string can never forge a second line or a field. Keys are written with only
/// `[A-Za-z0-9_.-]` (anything else becomes `_`). Secrets must be passed as `Redacted`,
/// which prints `<redacted>`. `LogLine.parse` reads a line back (for tests and tools).
public struct LogLine: Sendable, Equatable, CustomStringConvertible {
    public enum Level: String, Sendable, Comparable, CaseIterable {
        case debug, info, notice, warning, error
        var rank: Int {
            switch self {
            case .debug: return 0
            case .info: return 1
            case .notice: return 2
            case .warning: return 3
            case .error: return 4
            }
        }
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

    /// The value of the first field named `key` (nil when the line has none).
    public subscript(_ key: String) -> String? {
        fields.first { $0.0 == key }?.1
    }

    public static func == (a: LogLine, b: LogLine) -> Bool {
        a.level == b.level && a.event == b.event && a.fields.count == b.fields.count
            && zip(a.fields, b.fields).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
    }

    public var description: String {
        var out = "level=\(level.rawValue) event=\(Self.quote(event))"
        for (k, v) in fields { out += " \(Self.key(k))=\(Self.quote(v))" }
        return out
    }

    /// A key as written: `[A-Za-z0-9_.-]`, anything else replaced by `_`, never empty.
    public static func key(_ k: String) -> String {
        let s = String(String.UnicodeScalarView(k.unicodeScalars.map { isKeyScalar($0) ? $0 : "_" }))
        return s.isEmpty ? "_" : s
    }

    static func isKeyScalar(_ u: Unicode.Scalar) -> Bool {
        switch u {
        case "a"..."z", "A"..."Z", "0"..."9", "_", ".", "-": return true
        default: return false
        }
    }

    /// A value as written: bare when it holds nothing special, else quoted with escapes.
    public static func quote(_ v: String) -> String {
        var needsQuotes = v.isEmpty
        var escaped = ""
        for u in v.unicodeScalars {
            switch u {
            case "\"": escaped += "\\\""; needsQuotes = true
            case "\\": escaped += "\\\\"; needsQuotes = true
            case " ", "=": escaped.unicodeScalars.append(u); needsQuotes = true
            default:
                if let e = escapeControl(u) { escaped += e; needsQuotes = true }
                else { escaped.unicodeScalars.append(u) }
            }
        }
        return needsQuotes ? "\"" + escaped + "\"" : escaped
    }

    /// A value with only its control characters escaped (the journal's field values, which
    /// need no quoting: each is its own field).
    public static func escapeControls(_ v: String) -> String {
        var out = ""
        for u in v.unicodeScalars {
            if let e = escapeControl(u) { out += e } else { out.unicodeScalars.append(u) }
        }
        return out
    }

    /// `\n`, `\r`, `\t`, `\xHH` for the other C0 controls, DEL and the C1 controls (U+0085
    /// is a line break to some readers), `\uHHHH` for U+2028/U+2029; nil for anything else.
    static func escapeControl(_ u: Unicode.Scalar) -> String? {
        switch u.value {
        case 0x0a: return "\\n"
        case 0x0d: return "\\r"
        case 0x09: return "\\t"
        case 0..<0x20, 0x7f...0x9f: return "\\x" + hex(u.value, digits: 2)
        case 0x2028, 0x2029: return "\\u" + hex(u.value, digits: 4)
        default: return nil
        }
    }

    static func hex(_ v: UInt32, digits: Int) -> String {
        let s = String(v, radix: 16)
        return String(repeating: "0", count: max(0, digits - s.count)) + s
    }
}

// MARK: - Reading a line back

extension LogLine {
    /// Parses a line as `description` writes it: `level=<level> event=<name>` first, then
    /// `key=value` fields separated by one space, values bare or quoted with the escapes
    /// above. Throws `CastError(.malformed)` naming the first thing that is wrong; never traps.
    public static func parse(_ line: String) throws -> LogLine {
        var p = Parser(Array(line.unicodeScalars))
        var pairs: [(String, String)] = []
        while !p.atEnd {
            if !pairs.isEmpty { try p.expect(" ") }
            pairs.append(try p.pair())
        }
        guard pairs.count >= 2, pairs[0].0 == "level", pairs[1].0 == "event" else {
            throw CastError(.malformed, "log line: it must start with level= and event=")
        }
        guard let level = Level(rawValue: pairs[0].1) else {
            throw CastError(.malformed, "log line: unknown level \(quote(String(pairs[0].1.prefix(16))))")
        }
        var l = LogLine(level, pairs[1].1)
        l.fields = Array(pairs.dropFirst(2))
        return l
    }

    private struct Parser {
        let s: [Unicode.Scalar]
        var i = 0
        init(_ s: [Unicode.Scalar]) { self.s = s }
        var atEnd: Bool { i >= s.count }

        func fail(_ what: String) -> CastError {
            CastError(.malformed, "log line: \(what) at character \(i)")
        }

        mutating func expect(_ c: Unicode.Scalar) throws {
            guard i < s.count, s[i] == c else { throw fail("expected \"\(c.escaped(asASCII: true))\"") }
            i += 1
        }

        mutating func pair() throws -> (String, String) {
            var key = String.UnicodeScalarView()
            while i < s.count, LogLine.isKeyScalar(s[i]) { key.append(s[i]); i += 1 }
            guard !key.isEmpty else { throw fail("expected a key") }
            try expect("=")
            return (String(key), try value())
        }

        mutating func value() throws -> String {
            var out = String.UnicodeScalarView()
            guard i < s.count, s[i] == "\"" else {
                // Bare: up to the next space; none of the characters that force quotes.
                while i < s.count, s[i] != " " {
                    let u = s[i]
                    guard u != "\"", u != "\\", u != "=", LogLine.escapeControl(u) == nil else {
                        throw fail("unquoted value holds \(u.escaped(asASCII: true))")
                    }
                    out.append(u); i += 1
                }
                guard !out.isEmpty else { throw fail("empty unquoted value") }
                return String(out)
            }
            i += 1
            while true {
                guard i < s.count else { throw fail("unterminated quoted value") }
                let u = s[i]; i += 1
                switch u {
                case "\"": return String(out)
                case "\\":
                    guard i < s.count else { throw fail("unterminated escape") }
                    let e = s[i]; i += 1
                    switch e {
                    case "\"", "\\": out.append(e)
                    case "n": out.append("\n")
                    case "r": out.append("\r")
                    case "t": out.append("\t")
                    case "x": out.append(try hexScalar(digits: 2))
                    case "u": out.append(try hexScalar(digits: 4))
                    default: throw fail("unknown escape \\\(e.escaped(asASCII: true))")
                    }
                default:
                    guard LogLine.escapeControl(u) == nil else { throw fail("raw control character in a value") }
                    out.append(u)
                }
            }
        }

        mutating func hexScalar(digits: Int) throws -> Unicode.Scalar {
            guard i + digits <= s.count else { throw fail("short hex escape") }
            var v: UInt32 = 0
            for _ in 0..<digits {
                guard let d = UInt32(String(s[i]), radix: 16) else { throw fail("bad hex digit") }
                v = v << 4 | d
                i += 1
            }
            guard let u = Unicode.Scalar(v) else { throw fail("hex escape is not a scalar") }
            return u
        }
    }
}

/// Where log lines go. The IO shell supplies stderr or the journal.
public protocol LogSink: Sendable {
    func write(_ line: LogLine)
}
