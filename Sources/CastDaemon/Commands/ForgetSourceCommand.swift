import CastCapture
import CastCore
import CastIO
import CastSignaling

/// `castd --forget-source` (issue 31): deletes the ScreenCast portal's saved restore tokens
/// (the monitor's and the window's), so the portal's dialog asks again on the next cast.
/// With `--session` the daemon does this first, then casts.
enum ForgetSourceCommand {
    struct Result {
        /// Each deleted token's source type and what it restored.
        var forgotten: [(source: PortalSourceType, restores: String)]
        var sentence: String
    }

    static func forget(environment: [String: String]) throws -> Result {
        let directory = try CredentialStore.defaultDirectory(environment: environment)
        var forgotten: [(source: PortalSourceType, restores: String)] = []
        for type in PortalSourceType.allCases {
            if let saved = try RestoreTokenStore(directory: directory, sourceType: type).forget() {
                forgotten.append((type, saved.restores))
            }
        }
        return Result(forgotten: forgotten, sentence: sentence(forgotten.map(\.restores)))
    }

    /// One sentence saying what was forgotten (or that nothing was saved).
    static func sentence(_ restores: [String]) -> String {
        guard !restores.isEmpty else {
            return "No screen-sharing choice was saved, so there was nothing to forget; the portal's dialog asks on the next cast."
        }
        return "Forgot \(restores.joined(separator: " and ")); the portal's dialog asks again on the next cast."
    }

    static func run(_ c: CommonOptions, environment: [String: String]) -> Int32 {
        var out = StandardStream.out
        let result: Result
        do { result = try forget(environment: environment) } catch {
            var err = StandardStream.err
            print("castd: \((error as? CastError)?.message ?? "\(error)")", to: &err)
            return CLI.ExitCode.failure
        }
        if c.json {
            let items: [[String: Any]] = result.forgotten.map { ["source": "\($0.source)", "restores": $0.restores] }
            if let line = JSONLine.encode(["forgotten": items, "message": result.sentence]) { out.writeLine(line) }
        } else {
            out.writeLine(result.sentence)
        }
        return CLI.ExitCode.ok
    }
}
