/// castd's command line described as data: every command, its options, environment,
/// exit codes, signals, files and examples. `--help`, `castd help <command>`, the man
/// pages and the shell completions are all generated from it (HelpRenderer,
/// ManPageRenderer, CompletionRenderer), and a test runs every option it lists through
/// `CommandLineParser`, so documentation and parser cannot drift apart unseen.
/// The data itself is in `CastdCommands.swift`.
struct CommandSpec: Sendable {
    /// The word after `castd` (`pair`), or nil for the daemon (`castd --session <id>`).
    var name: String?
    /// One line: what the command does (the man page's NAME, the overview's list).
    var summary: String
    /// Usage lines without the leading `castd`.
    var synopsis: [String]
    /// Paragraphs.
    var description: [String]
    var options: [OptionSpec]
    /// Positional arguments (name and help), in order.
    var operands: [(name: String, help: String)] = []
    var environment: [(name: String, help: String)] = []
    var exitCodes: [(code: Int32, help: String)] = []
    var signals: [(name: String, help: String)] = []
    var files: [(path: String, help: String)] = []
    var examples: [(command: String, help: String)] = []

    /// The man page's name: `castd` for the daemon, `castd-pair` for `pair`.
    var manName: String { name.map { "castd-\($0)" } ?? "castd" }
    /// What a person types: `castd pair`, or `castd --session` for the daemon.
    var invocation: String { name.map { "castd \($0)" } ?? "castd --session" }
}

/// One option (`--capture auto|x11|portal|mutter`).
struct OptionSpec: Sendable {
    enum Value: Sendable {
        /// A flag without a value (`--json`).
        case none
        /// One of these words.
        case choice([String])
        /// A file path (completed as a file).
        case file(String)
        /// Free text; `sample` is a valid example (the parser test uses it).
        case text(String, sample: String)
    }

    var flag: String
    var short: String? = nil
    var value: Value = .none
    var help: String
    /// The configuration key this option sets (flag > environment > file > default).
    var configKey: ConfigKey? = nil
    /// For a flag without a value that sets a key: the value it sets (`--no-cursor` → `false`).
    var setsValue: String? = nil
    /// Parsed on another branch (see `CastdCommands.parsedElsewhere`); documented here already.
    var parsedElsewhere = false

    /// `URL`, `auto|x11|portal|mutter`, `PEM`; nil for a flag.
    var valueName: String? {
        switch value {
        case .none: nil
        case .choice(let c): c.joined(separator: "|")
        case .file(let n): n
        case .text(let n, _): n
        }
    }

    /// A value the parser must accept (the first choice, the sample).
    var sampleValue: String? {
        switch value {
        case .none: nil
        case .choice(let c): c.first
        case .file: "/tmp/castd-sample.pem"
        case .text(_, let s): s
        }
    }

    /// `--capture auto|x11|portal|mutter`.
    var usage: String { valueName.map { "\(flag) \($0)" } ?? flag }
}
