import Testing
import CastCore
import Foundation
@testable import CastDaemon

/// The spec (CastdCommands) and the parser (CommandLineParser) agree: every option the spec
/// documents is accepted by its command, and nothing the parser accepts is undocumented.
@Suite struct CommandSpecTests {
    static let id = "7f0c9a12-3b4c-4d5e-8f60-718293a4b5c6"

    /// Arguments that make each command valid on their own, so an option can be added to them.
    static func base(_ c: CommandSpec) -> [String] {
        switch c.name {
        case nil: ["--session", id]
        case "pair": ["pair", "--pin", "482913"]
        case "doctor": ["doctor", "--turn", "--turn-url", "turn:127.0.0.1:3478", "--turn-user", "u"]
        case let n?: [n]
        }
    }

    static func parses(as c: CommandSpec, _ command: Command) -> Bool {
        switch (c.name, command) {
        case (nil, .session), ("pair", .pair), ("doctor", .doctor), ("config", .config), ("status", .status), ("stop", .stop): true
        default: false
        }
    }

    static func settings(_ command: Command) -> [ConfigKey: FlagSetting] {
        switch command {
        case .session(let o): o.common.settings
        case .pair(let o): o.common.settings
        case .doctor(let o): o.common.settings
        case .config(let o): o.common.settings
        default: [:]
        }
    }

    @Test(arguments: CastdCommands.all.map { $0.manName })
    func everyDocumentedOptionIsAcceptedWithItsSampleValue(page: String) throws {
        let spec = try #require(CastdCommands.all.first { $0.manName == page })
        for o in spec.options {
            let args = Self.base(spec) + [o.flag] + (o.sampleValue.map { [$0] } ?? [])
            let command: Command
            do { command = try CommandLineParser.parse(args) }
            catch { Issue.record("\(spec.invocation) rejects its documented \(o.usage): \(error)"); continue }
            #expect(Self.parses(as: spec, command), "\(args) parsed as \(command)")
            if let key = o.configKey {
                // The flag's value reaches the configuration (flag > environment > file).
                #expect(Self.settings(command)[key] == FlagSetting(flag: o.flag, value: o.sampleValue ?? o.setsValue!))
            }
        }
    }

    /// Every `--flag` literal in the parser's source, and every flag of any command: a command
    /// accepts exactly the ones its spec lists.
    static func parserFlags() throws -> Set<String> {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("Sources/CastDaemon/CommandLineOptions.swift"), encoding: .utf8)
        var flags: Set<String> = []
        for piece in text.split(separator: "\"") where piece.hasPrefix("--") && piece.count > 2
            && piece.dropFirst(2).allSatisfy({ $0.isLowercase || $0 == "-" }) {
            flags.insert(String(piece))
        }
        return flags
    }

    @Test func everyFlagTheParserKnowsIsDocumented() throws {
        let documented = Set(CastdCommands.all.flatMap { $0.options.map(\.flag) })
        let parser = try Self.parserFlags()
        #expect(parser.count > 20, "the parser's flags were not found: \(parser)")
        #expect(parser.subtracting(documented).subtracting(["--help", "--version"]).isEmpty)
    }

    @Test(arguments: CastdCommands.all.map { $0.manName })
    func noCommandAcceptsAFlagItsSpecDoesNotList(page: String) throws {
        let spec = try #require(CastdCommands.all.first { $0.manName == page })
        let own = Set(spec.options.map(\.flag))
        let everyFlag = Set(CastdCommands.all.flatMap { $0.options.map(\.flag) }).union(try Self.parserFlags())
            .union(["--frobnicate", "--version"]).subtracting(["--help"])
        for flag in everyFlag.subtracting(own).sorted() {
            do {
                let c = try CommandLineParser.parse(Self.base(spec) + [flag, "sample"])
                Issue.record("\(spec.invocation) accepts \(flag), which its spec does not list: \(c)")
            } catch let e as CastError {
                #expect(e.message.contains("unknown command or option"), "\(spec.invocation) \(flag): \(e.message)")
            }
        }
    }

    @Test func helpForEachCommandIsItsOwnAndExitsZero() async throws {
        #expect(try CommandLineParser.parse(["pair", "--help"]) == .commandHelp(.pair))
        #expect(try CommandLineParser.parse(["doctor", "--turn", "--help"]) == .commandHelp(.doctor))
        #expect(try CommandLineParser.parse(["help", "stop"]) == .commandHelp(.stop))
        #expect(try CommandLineParser.parse(["help", "--session"]) == .commandHelp(.session))
        #expect(try CommandLineParser.parse(["--session", Self.id, "-h"]) == .commandHelp(.session))
        #expect(try CommandLineParser.parse(["help"]) == .help)
        #expect(throws: CastError.self) { try CommandLineParser.parse(["help", "frob"]) }
        for topic in HelpTopic.allCases {
            #expect(await CLI.run(arguments: ["help", topic.rawValue], environment: [:]) == CLI.ExitCode.ok)
        }
        #expect(await CLI.run(arguments: ["pair", "--help"], environment: [:]) == CLI.ExitCode.ok)
        #expect(await CLI.run(arguments: ["doctor", "--help"], environment: [:]) == CLI.ExitCode.ok)
    }

    @Test func commandHelpNamesEveryOptionAndConfigKey() {
        for spec in CastdCommands.all {
            let text = HelpRenderer.command(spec).replacingOccurrences(of: "\n", with: " ")
            for o in spec.options { #expect(text.contains(o.usage), "\(spec.invocation) help lacks \(o.usage)") }
            for o in spec.options where o.configKey != nil { #expect(text.contains("\(o.flag) = \(o.configKey!.rawValue)")) }
        }
    }

    @Test func theConfigPageDocumentsEveryKeyWithItsVariable() {
        let page = ManPageRenderer.configPage()
        for key in ConfigKey.allCases {
            #expect(page.contains("\\fB\(key.rawValue)\\fR = "), "castd.conf(5) lacks \(key.rawValue)")
            #expect(page.contains(ManPageRenderer.text(key.environmentName)))
        }
    }

    @Test func manPageTextIsEscapedForGroff() {
        #expect(ManPageRenderer.text(".start") == "\\&.start")
        #expect(ManPageRenderer.text("a\\b --x `y` …") == "a\\eb \\-\\-x \\fBy\\fR \\&...")
        #expect(ManPageRenderer.text("é") == "\\[u00E9]")
    }

    @Test func newCommandsAndFlagsParse() throws {
        #expect(try CommandLineParser.parse(["status", "--json"]) == .status({ var o = StatusOptions(); o.common.json = true; return o }()))
        let stop = try CommandLineParser.parse(["stop", Self.id.uppercased()])
        #expect(stop == .stop({ var o = StopOptions(); o.sessionId = Self.id; return o }()))
        #expect(throws: CastError.self) { try CommandLineParser.parse(["stop", "not-a-uuid"]) }
        #expect(throws: CastError.self) { try CommandLineParser.parse(["stop", Self.id, Self.id]) }
        guard case .session(let s) = try CommandLineParser.parse(["--session", Self.id, "--no-notify"]) else {
            Issue.record("not a session"); return
        }
        #expect(!s.notify && s.common.settings[.notify] == FlagSetting(flag: "--no-notify", value: "false"))
        #expect(try CommandLineParser.parse(["pair", "-"]) == .pair(PairOptions(code: .url(Redacted("-")))))
        #expect(try CommandLineParser.parse(["pair", "--pin", "-"]) == .pair(PairOptions(code: .pin(Redacted("-")))))
        guard case .config(let c) = try CommandLineParser.parse(["config", "--json", "--session", Self.id, "--api-url", "https://a.test/"]) else {
            Issue.record("not config"); return
        }
        #expect(c.sessionId == Self.id && c.common.json && c.common.apiURL == "https://a.test")
        #expect(throws: CastError.self) { try CommandLineParser.parse(["--session", Self.id, "--api-url", "ftp://x"]) }
    }

    @Test func generateDocsWritesEveryPageAndCompletion() {
        let files = GenerateDocs.files(.init(manDirectory: "m", completionsDirectory: "c"))
        #expect(Set(files.map { "\($0.directory)/\($0.name)" }) == [
            "m/castd.1", "m/castd-pair.1", "m/castd-doctor.1", "m/castd-config.1", "m/castd-status.1", "m/castd-stop.1",
            "m/castd.conf.5", "c/castd.bash", "c/_castd", "c/castd.fish"])
        #expect(throws: CastError.self) { try GenerateDocs.parse([]) }
        #expect(throws: CastError.self) { try GenerateDocs.parse(["--html", "x"]) }
    }
}
