import CastCore

/// The config file, parsed (pure: text in, entries or the first error out).
///
/// Format (docs/configuration.md): one `key = value` per line; blank lines and lines
/// starting with `#` are ignored, and so is a `#` that follows whitespace (a comment at the
/// end of a line). A value may be written in double quotes to keep a `#` or surrounding
/// spaces (`window = "Slides #2"`). A key may appear once.
public struct ConfigFile: Equatable, Sendable {
    public struct Entry: Equatable, Sendable {
        public var value: String
        public var line: Int
    }

    /// Where the file is (for messages and the `castd config` source column).
    public var path: String
    public var entries: [ConfigKey: Entry]

    /// The file's limit: a config file is a few hundred bytes; anything this large is not one.
    static let maxBytes = 64 * 1024

    public init(path: String, entries: [ConfigKey: Entry] = [:]) {
        self.path = path
        self.entries = entries
    }

    /// Parses `text`; the error names the file, the line and what to write instead.
    public static func parse(_ text: String, path: String) throws -> ConfigFile {
        var file = ConfigFile(path: path)
        // "\r\n" is one Character in Swift: split on it too, so a file written on Windows reads the same.
        for (index, raw) in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }).enumerated() {
            let n = index + 1
            func fail(_ what: String) -> CastError { CastError(.badConfig, "\(path) line \(n): \(what)") }
            let line = raw.trimmingWhitespace()
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let eq = line.firstIndex(of: "=") else {
                throw fail("expected `key = value` (got `\(LogLine.quote(String(line)))`)")
            }
            let name = String(line[..<eq]).trimmingWhitespace()
            guard let key = ConfigKey(rawValue: name) else {
                let hint = ConfigKey.nearest(to: name).map { " (did you mean `\($0.rawValue)`?)" } ?? ""
                throw fail("unknown key `\(LogLine.quote(name))`\(hint); known keys: "
                           + ConfigKey.allCases.map(\.rawValue).joined(separator: ", "))
            }
            let value: String
            do { value = try unquote(String(line[line.index(after: eq)...])) }
            catch let e as CastError { throw fail("\(key.rawValue): \(e.message)") }
            if let first = file.entries[key] {
                throw fail("`\(key.rawValue)` is already set on line \(first.line); keep one of the two")
            }
            switch key.normalize(value) {
            case .success(let v): file.entries[key] = Entry(value: v, line: n)
            case .failure(let e): throw fail(e.sentence)
            }
        }
        return file
    }

    /// The value part: trimmed, a trailing ` # comment` dropped, or the text inside double quotes.
    static func unquote(_ s: String) throws -> String {
        let t = s.trimmingWhitespace()
        if t.hasPrefix("\"") {
            let body = t.dropFirst()
            guard let close = body.firstIndex(of: "\"") else { throw CastError(.badConfig, "the closing `\"` is missing") }
            let after = body[body.index(after: close)...].trimmingWhitespace()
            guard after.isEmpty || after.hasPrefix("#") else { throw CastError(.badConfig, "only a comment may follow the quoted value") }
            return String(body[..<close])
        }
        // A `#` after whitespace starts a comment.
        var out = ""
        var previous: Character = " "
        for c in t {
            if c == "#" && previous.isWhitespace { break }
            out.append(c)
            previous = c
        }
        return out.trimmingWhitespace()
    }
}

extension ConfigKey {
    /// The known key a typo most likely meant (at most two edits away), for the error sentence.
    static func nearest(to name: String) -> ConfigKey? {
        let scored = allCases.map { ($0, editDistance(Array(name.lowercased()), Array($0.rawValue))) }
        guard let best = scored.min(by: { $0.1 < $1.1 }), best.1 <= 2 else { return nil }
        return best.0
    }

    /// Levenshtein distance (insertions, deletions, substitutions).
    static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty { return b.count }
        var row = Array(0...b.count)
        for i in 1...a.count {
            var diagonal = row[0]
            row[0] = i
            for j in stride(from: 1, through: b.count, by: 1) {
                let above = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1))
                diagonal = above
            }
        }
        return row[b.count]
    }
}

extension CastError.Code {
    /// The config file or a CASTD_* variable holds something castd cannot use.
    public static let badConfig = Self("bad_config")
}
