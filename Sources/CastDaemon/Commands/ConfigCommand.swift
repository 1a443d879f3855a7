import CastCore
import CastSystem

/// `castd config [--json] [--session ID]`: every key's effective value and where it came
/// from (docs/configuration.md). The publishable key is shortened; nothing secret is in the
/// configuration (tokens live in the state directory and are never printed).
enum ConfigCommand {
    static func run(_ o: ConfigOptions, environment: [String: String]) -> Int32 {
        var out = StandardStream.out
        let config: EffectiveConfig
        do { config = try ConfigLoader.load(o.common, environment: environment, sessionID: o.sessionId) }
        catch {
            var err = StandardStream.err
            err.writeLine("castd: \((error as? CastError)?.message ?? "\(error)")")
            return CLI.ExitCode.usage
        }
        let fileExists = config.settings.values.contains { if case .file = $0.source { true } else { false } }
            || (config.filePath.map { (try? PrivateFile.read($0, limit: ConfigFile.maxBytes)) != nil } ?? false)
        if o.common.json {
            var keys: [String: Any] = [:]
            for key in ConfigKey.allCases {
                let s = config.settings[key]!
                keys[key.rawValue] = ["value": config.display(key) as Any, "source": s.source.kind,
                                      "from": s.source.description, "environment": key.environmentName] as [String: Any]
            }
            let obj: [String: Any] = ["file": config.filePath as Any, "fileExists": fileExists, "keys": keys]
            if let s = JSONLine.encode(obj) { out.writeLine(s) }
        } else {
            out.writeLine(lines(config, fileExists: fileExists).joined(separator: "\n"))
        }
        return CLI.ExitCode.ok
    }

    /// The table a person reads: key, value, source.
    static func lines(_ config: EffectiveConfig, fileExists: Bool) -> [String] {
        let file = config.filePath.map { "\($0)\(fileExists ? "" : " (none there)")" } ?? "none (neither XDG_CONFIG_HOME nor HOME is set)"
        var out = ["Config file: \(file)"]
        let width = ConfigKey.allCases.map(\.rawValue.count).max()! + 2
        let values = ConfigKey.allCases.map { config.display($0) ?? "(unset)" }
        let valueWidth = min(44, values.map(\.count).max()! + 2)
        for (key, value) in zip(ConfigKey.allCases, values) {
            let k = key.rawValue + String(repeating: " ", count: width - key.rawValue.count)
            let v = value + String(repeating: " ", count: max(1, valueWidth - value.count))
            out.append("  \(k)\(v)\(config.settings[key]!.source)")
        }
        return out
    }
}
