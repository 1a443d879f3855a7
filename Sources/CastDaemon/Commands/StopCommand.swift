/// `castd stop`: placeholder until the desktop-integration branch (h-desk) lands its
/// implementation in this file (the runtime registry, docs/desktop-integration.md).
enum StopCommand {
    static func run(_ o: StopOptions, environment: [String: String]) async -> Int32 {
        var err = StandardStream.err
        err.writeLine("castd: `castd stop` is not in this build.")
        return CLI.ExitCode.unavailable
    }
}
