import Testing
@testable import CastDaemon

@Suite struct CLITests {
    @Test func helpAndVersionSucceed() {
        #expect(CLI.run(arguments: ["--help"], environment: [:]) == CLI.ExitCode.ok)
        #expect(CLI.run(arguments: ["--version"], environment: [:]) == CLI.ExitCode.ok)
    }

    @Test func unknownOptionIsAUsageError() {
        #expect(CLI.run(arguments: ["--frobnicate"], environment: [:]) == CLI.ExitCode.usage)
        #expect(CLI.run(arguments: [], environment: [:]) == CLI.ExitCode.usage)
    }

    @Test func helpDocumentsEveryExitCode() {
        for code in [CLI.ExitCode.ok, CLI.ExitCode.failure, CLI.ExitCode.usage, CLI.ExitCode.unavailable] {
            #expect(CLI.helpText.contains("\n  \(code) "))
        }
    }
}
