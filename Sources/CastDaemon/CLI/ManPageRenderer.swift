import CastCore

/// The man pages, in groff's man macros (man(7)), rendered from the spec: castd(1) for the
/// daemon with the list of commands, castd-<command>(1) for each command, and
/// castd.conf(5) for the config file (from `ConfigKey`).
enum ManPageRenderer {
    /// File name → page text, as `castd generate-docs --man DIR` writes them.
    static func pages() -> [(file: String, text: String)] {
        CastdCommands.all.map { ("\($0.manName).1", page($0)) } + [("castd.conf.5", configPage())]
    }

    static func header(_ name: String, _ section: Int, _ manual: String) -> String {
        // No date: the page must be the same for the same castd (reproducible packages).
        ".TH \(name.uppercased()) \(section) \"\" \"castd \(CastdVersion.string)\" \"\(manual)\"\n.nh\n"
    }

    static func page(_ c: CommandSpec) -> String {
        var s = header(c.manName, 1, "User Commands")
        s += ".SH NAME\n\(c.manName) \\- \(text(c.summary))\n"
        s += ".SH SYNOPSIS\n"
        for line in c.synopsis { s += ".B castd\n\(synopsis(line))\n.br\n" }
        s += ".SH DESCRIPTION\n"
        for (i, p) in c.description.enumerated() { s += (i == 0 ? "" : ".PP\n") + text(p) + "\n" }
        if c.name == nil {
            s += ".SH COMMANDS\n"
            for sub in CastdCommands.all where sub.name != nil {
                s += ".TP\n.B castd \(sub.name!)\n\(text(HelpRenderer.sentence(sub.summary))) See \\fB\(sub.manName)\\fR(1).\n"
            }
            s += ".TP\n.BR \"castd help\" \" \\fICOMMAND\\fR\"\nThe help of one command (also \\fBcastd \\fICOMMAND\\fB \\-\\-help\\fR).\n"
        }
        if !c.operands.isEmpty {
            s += ".SH ARGUMENTS\n"
            for o in c.operands { s += ".TP\n.I \(text(o.name))\n\(text(o.help))\n" }
        }
        s += ".SH OPTIONS\n"
        for o in c.options {
            s += ".TP\n\\fB\(text(o.flag))\\fR" + (o.valueName.map { " \\fI\(text($0))\\fR" } ?? "") + "\n" + text(o.help)
            if let key = o.configKey { s += " Config key \\fB\(key.rawValue)\\fR, environment \\fB\(text(key.environmentName))\\fR." }
            s += "\n"
        }
        s += ".TP\n\\fB\\-\\-help\\fR\nPrint this help and exit.\n"
        s += section("ENVIRONMENT", c.environment)
        s += section("FILES", c.files.map { ($0.path, $0.help) }, term: ".I")
        s += section("EXIT STATUS", c.exitCodes.map { ("\($0.code)", $0.help) })
        s += section("SIGNALS", c.signals)
        s += section("EXAMPLES", c.examples.map { ($0.command, $0.help) })
        let others = (CastdCommands.all.map(\.manName) + ["castd.conf"]).filter { $0 != c.manName }
        s += ".SH SEE ALSO\n" + others.map { "\\fB\($0)\\fR(\($0 == "castd.conf" ? 5 : 1))" }.joined(separator: ",\n") + "\n"
        return s
    }

    /// A section of tagged paragraphs (term in bold, or italics with `.I`); nothing when empty.
    static func section(_ title: String, _ items: [(String, String)], term: String = ".B") -> String {
        guard !items.isEmpty else { return "" }
        return ".SH \(title)\n" + items.map { ".TP\n\(term) \(text($0.0))\n\(text($0.1))\n" }.joined()
    }

    static func configPage() -> String {
        var s = header("castd.conf", 5, "File Formats")
        s += ".SH NAME\ncastd.conf \\- configuration file of castd\n"
        s += ".SH SYNOPSIS\n.I ~/.config/castd/config\n.br\n.I $XDG_CONFIG_HOME/castd/config\n"
        s += ".SH DESCRIPTION\n"
        s += text("castd reads its configuration from this file when it exists. Each line is `key = value`; blank lines and lines starting with `#` are ignored, and so is the rest of a line after a `#` that follows a space. A value may be written in double quotes to keep a `#` or surrounding spaces. Each key may appear once. An unknown key or a value castd cannot use stops it with a message naming the line and what the key takes.") + "\n"
        s += ".PP\n" + text("Every key can also be set by an environment variable, CASTD_ and the key in upper case with `-` as `_` (max-fps: CASTD_MAX_FPS; an empty variable counts as unset), and most by a flag of the same name. A flag wins over the environment, the environment over this file, this file over the default. For api-url, the origin of the QR link a session was paired with comes after this file and before the default. `castd config` prints every effective value and where it came from.") + "\n"
        s += ".SH KEYS\n"
        for key in ConfigKey.allCases {
            s += ".TP\n\\fB\(key.rawValue)\\fR = \\fI\(text(key.allowedDescription))\\fR\n\(text(key.help))"
            s += " Default: \(text(key.defaultDescription))."
            s += " Environment: \\fB\(text(key.environmentName))\\fR."
            if let flag = flags(for: key).first { s += " Flag: \\fB\(text(flag))\\fR." }
            s += "\n"
        }
        s += ".SH CAPS\n" + text("max-fps, max-bitrate-kbps and max-height only lower the ceilings castd casts under (1080p30 and 4 Mbit/s, from the iPadCast specification); they never raise them. The receiver's own preference (e.g. 720p) and the congestion control still apply below them. A lower max-height shrinks the 1920×1080 box at 16:9, keeping the screen's aspect ratio; a portrait screen uses the box turned.") + "\n"
        s += ".SH EXAMPLE\n.nf\n"
        s += text("# ~/.config/castd/config\nsupabase-key = sb_publishable_…\ncapture = x11\naudio = off   # video only\nmax-fps = 15\n")
        s += ".fi\n.SH SEE ALSO\n\\fBcastd\\fR(1), \\fBcastd-config\\fR(1)\n"
        return s
    }

    /// The flags that set `key` (`--no-cursor` for cursor).
    static func flags(for key: ConfigKey) -> [String] {
        var seen: [String] = []
        for c in CastdCommands.all { for o in c.options where o.configKey == key && !seen.contains(o.flag) { seen.append(o.flag) } }
        return seen
    }

    /// A synopsis line: the words in bold, VALUES and `…` in italics.
    static func synopsis(_ line: String) -> String {
        line.split(separator: " ").map { w -> String in
            let word = String(w)
            let isValue = word.contains(where: \.isUppercase) && !word.contains("--")
            return isValue ? "\\fI\(text(word))\\fR" : "\\fB\(text(word))\\fR"
        }.joined(separator: " ")
    }

    /// Spec text as groff input: backslashes escaped, `-` as \-, `code` in bold, a leading `.`
    /// or `'` guarded, and characters beyond ASCII as groff's named or Unicode escapes (so the
    /// page renders the same without preconv).
    static func text(_ s: String) -> String {
        var out = ""
        var bold = false
        for u in s.unicodeScalars {
            switch u {
            case "\\": out += "\\e"
            case "-": out += "\\-"
            case "`": out += bold ? "\\fR" : "\\fB"; bold.toggle()
            case "—": out += "\\(em"
            case "…": out += "\\&..."
            case "×": out += "\\(mu"
            case "≈": out += "\\(~~"
            case "§": out += "\\(sc"
            default:
                if u.value < 128 { out.unicodeScalars.append(u) }
                else { out += "\\[u\(String(u.value, radix: 16, uppercase: true).leftPadded(to: 4))]" }
            }
        }
        if bold { out += "\\fR" }
        // A line starting with `.` or `'` would be read as a request.
        return out.split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasPrefix(".") || $0.hasPrefix("'") ? "\\&" + $0 : String($0) }.joined(separator: "\n")
    }
}

extension String {
    func leftPadded(to n: Int) -> String { count >= n ? self : String(repeating: "0", count: n - count) + self }
}
