/// `castd status`: placeholder until the desktop-integration branch (h-desk) lands its
/// implementation in this file (the runtime registry, docs/desktop-integration.md).
enum StatusCommand {
    static func run(_ o: StatusOptions, environment: [String: String]) -> Int32 {
        var err = StandardStream.err
        err.writeLine("castd: `castd status` is not in this build.")
        return CLI.ExitCode.unavailable
    }
}
