import CastCore

/// `castd --help` and `castd <command> --help`, rendered from the spec (CastdCommands).
enum HelpRenderer {
    static let width = 80

    /// `castd --help`: every command in a line or two, the shared options, configuration, exit codes.
    static func overview() -> String {
        var s = "castd \(CastdVersion.string) — cast this Linux screen to an iPadCast Chrome receiver.\n\nUsage:\n"
        for c in CastdCommands.all {
            for line in c.name == nil ? CastdCommands.daemonOverview : c.synopsis { s += "  castd \(line)\n" }
        }
        s += "  castd help COMMAND | castd COMMAND --help\n  castd --help | --version\n\nCommands:\n"
        for c in CastdCommands.all {
            s += column(c.name.map { "  \($0)" } ?? "  --session ID", sentence(c.summary), at: 18)
        }
        s += "\nOptions of every command that talks to the backend (pair, doctor, config, --session):\n"
        for o in CastdCommands.backendOptions + [CastdCommands.json] { s += option(o) }
        s += "\nConfiguration: \(CastdCommands.configFile.path) (castd.conf(5)), lines `key = value`.\n"
        s += wrap("A flag wins over the environment (CASTD_<KEY>), the environment over the file, the file over the default (the production backend). `castd config` prints each value and where it came from.", indent: 0)
        s += wrap("Environment: " + CastdCommands.backendEnvironment.map(\.name).joined(separator: ", ") + ".", indent: 0)
        s += "\n" + exitCodes(CastdCommands.exitCodes)
        s += "\nSignals: SIGTERM or SIGINT ends a cast cleanly (disconnect row, session end,\nexit 0 within 2 s); a second signal exits at once.\n"
        s += "More: castd help COMMAND, man castd, man castd.conf."
        return s
    }

    /// `castd pair --help`, `castd help pair`.
    static func command(_ c: CommandSpec) -> String {
        var s = "\(c.invocation) — \(c.summary)\n\nUsage:\n"
        for line in c.synopsis where c.name != nil || line.hasPrefix("--session") { s += "  castd \(line)\n" }
        s += "\n"
        for p in c.description { s += wrap(plain(p), indent: 0) + "\n" }
        if !c.operands.isEmpty {
            s += "Arguments:\n"
            for o in c.operands { s += column("  \(o.name)", plain(o.help), at: 30) }
            s += "\n"
        }
        s += "Options:\n"
        for o in c.options { s += option(o) }
        let keyed = c.options.filter { $0.configKey != nil }
        if !keyed.isEmpty {
            s += "\n" + wrap("Config keys (castd.conf(5)): " + keyed.map { "\($0.flag) = \($0.configKey!.rawValue)" }.joined(separator: ", ")
                             + ". A flag wins over CASTD_<KEY>, which wins over the file.", indent: 0)
        }
        if !c.environment.isEmpty {
            s += "\nEnvironment:\n"
            for e in c.environment { s += column("  \(e.name)", plain(e.help), at: 30) }
        }
        s += "\n" + exitCodes(c.exitCodes)
        if !c.signals.isEmpty {
            s += "\nSignals:\n"
            for g in c.signals { s += column("  \(g.name)", plain(g.help), at: 20) }
        }
        if !c.files.isEmpty {
            s += "\nFiles:\n"
            for f in c.files { s += column("  \(f.path)", plain(f.help), at: 30) }
        }
        if !c.examples.isEmpty {
            s += "\nExamples:\n"
            for e in c.examples { s += "  \(e.command)\n" + wrap(plain(e.help), indent: 6) }
        }
        s += "\nSee also: man \(c.manName)."
        return s
    }

    /// "Exit codes:" and one line per code, continuation lines indented (a test reads this shape).
    static func exitCodes(_ codes: [(code: Int32, help: String)]) -> String {
        "Exit codes:\n" + codes.map { column("  \($0.code)", $0.help, at: 6) }.joined()
    }

    static func option(_ o: OptionSpec) -> String {
        column("  " + o.usage, plain(o.help), at: 30)
    }

    /// `label` then `text` wrapped from column `at` (on the next line when the label is longer).
    static func column(_ label: String, _ text: String, at: Int) -> String {
        let body = wrap(text, indent: at).dropFirst(at)
        if label.count + 2 <= at { return label + String(repeating: " ", count: at - label.count) + body }
        return label + "\n" + String(repeating: " ", count: at) + body
    }

    /// Words filled to `width`, every line indented by `indent`, ending in a newline.
    static func wrap(_ text: String, indent: Int) -> String {
        let pad = String(repeating: " ", count: indent)
        var lines: [String] = []
        var line = ""
        for word in text.split(whereSeparator: { $0 == " " || $0 == "\n" }) {
            if !line.isEmpty && indent + line.count + 1 + word.count > width {
                lines.append(pad + line)
                line = ""
            }
            line += (line.isEmpty ? "" : " ") + word
        }
        if !line.isEmpty || lines.isEmpty { lines.append(pad + line) }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The first letter upper case and a full stop: the summaries are man-page NAME fragments.
    static func sentence(_ s: String) -> String { s.prefix(1).uppercased() + s.dropFirst() + "." }

    /// Help text as a terminal shows it (the spec marks code with backticks, kept as they are).
    static func plain(_ s: String) -> String { s }
}
