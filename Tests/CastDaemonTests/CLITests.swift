import Testing
@testable import CastDaemon

@Suite struct CLITests {
    @Test func helpAndVersionSucceed() async {
        #expect(await CLI.run(arguments: ["--help"], environment: [:]) == CLI.ExitCode.ok)
        #expect(await CLI.run(arguments: ["--version"], environment: [:]) == CLI.ExitCode.ok)
    }

    @Test func unknownOptionIsAUsageError() async {
        #expect(await CLI.run(arguments: ["--frobnicate"], environment: [:]) == CLI.ExitCode.usage)
        #expect(await CLI.run(arguments: [], environment: [:]) == CLI.ExitCode.usage)
    }

    @Test func helpDocumentsEveryExitCode() {
        for code in [CLI.ExitCode.ok, CLI.ExitCode.failure, CLI.ExitCode.usage, CLI.ExitCode.unavailable] {
            #expect(CLI.helpText.contains("\n  \(code) "))
        }
    }
}
