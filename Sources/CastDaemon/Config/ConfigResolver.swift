import CastCore

/// Where an effective value came from (`castd config` prints it beside the value).
public enum ConfigSource: Equatable, Sendable, CustomStringConvertible {
    case flag(String)
    case environment(String)
    case file(path: String, line: Int)
    /// The origin of the QR link the session was paired with (`castd pair URL`).
    case pairingLink(record: String?)
    case `default`

    public var description: String {
        switch self {
        case .flag(let f): "flag \(f)"
        case .environment(let n): "environment \(n)"
        case .file(let p, let l): "\(p):\(l)"
        case .pairingLink(let r): r.map { "pairing link (\($0))" } ?? "pairing link"
        case .default: "default"
        }
    }

    /// A short word for `--json` (`flag`, `environment`, `file`, `pairing-link`, `default`).
    public var kind: String {
        switch self {
        case .flag: "flag"
        case .environment: "environment"
        case .file: "file"
        case .pairingLink: "pairing-link"
        case .default: "default"
        }
    }
}

/// A value the command line set for a key, and the flag that set it.
public struct FlagSetting: Equatable, Sendable {
    public var flag: String
    public var value: String
    public init(flag: String, value: String) {
        self.flag = flag
        self.value = value
    }
}

/// Every key's effective value (nil: unset) and its source.
public struct EffectiveConfig: Equatable, Sendable {
    public struct Setting: Equatable, Sendable {
        public var value: String?
        public var source: ConfigSource
    }

    public var settings: [ConfigKey: Setting]
    /// The config file castd looked for (whether or not it exists), for messages.
    public var filePath: String?

    public subscript(_ key: ConfigKey) -> String? { settings[key]?.value }

    func bool(_ key: ConfigKey) -> Bool { self[key] != "false" }
    func int(_ key: ConfigKey) -> Int? { self[key].flatMap { Int($0) } }
}

/// flag > environment > file > pairing link (api-url only) > default, per key (pure).
public enum ConfigResolver {
    public static func resolve(flags: [ConfigKey: FlagSetting], environment: [String: String], file: ConfigFile?,
                               pairingOrigin: (origin: String, record: String?)? = nil) throws -> EffectiveConfig {
        var settings: [ConfigKey: EffectiveConfig.Setting] = [:]
        for key in ConfigKey.allCases {
            if let f = flags[key] {
                // The parser checked the value already; normalizing makes `--capture x11` and `capture = x11` equal.
                let v = (try? key.normalize(f.value).get()) ?? f.value
                settings[key] = .init(value: v, source: .flag(f.flag))
            } else if let raw = environment[key.environmentName], !raw.isEmpty {
                // An empty variable counts as unset (an EnvironmentFile may list the names without values).
                switch key.normalize(raw) {
                case .success(let v): settings[key] = .init(value: v, source: .environment(key.environmentName))
                case .failure(let e):
                    throw CastError(.badConfig, "\(key.environmentName): \(e.sentence); fix or unset the variable")
                }
            } else if let file, let e = file.entries[key] {
                settings[key] = .init(value: e.value, source: .file(path: file.path, line: e.line))
            } else if key == .apiURL, let p = pairingOrigin {
                settings[key] = .init(value: p.origin, source: .pairingLink(record: p.record))
            } else {
                settings[key] = .init(value: key.defaultValue, source: .default)
            }
        }
        return EffectiveConfig(settings: settings, filePath: file?.path)
    }
}

extension EffectiveConfig {
    /// The three backend values, or the sentence saying where to set the one that is missing.
    func backend(filePath: String?) throws -> (apiURL: String, supabaseURL: String, supabaseKey: String) {
        for key in [ConfigKey.apiURL, .supabaseURL, .supabaseKey] where self[key] == nil {
            let file = filePath.map { "add `\(key.rawValue) = …` to \($0), " } ?? ""
            let what = key == .supabaseKey ? "The Supabase publishable key is not set" : "\(key.rawValue) is not set"
            throw CastError(.usage, "\(what): \(file)set \(key.environmentName), or pass --\(key.rawValue).")
        }
        return (self[.apiURL]!, self[.supabaseURL]!, self[.supabaseKey]!)
    }

    /// The value as `castd config` prints it: the publishable key is public by design but
    /// shortened (first 8 characters and …); nothing else the configuration holds is secret.
    func display(_ key: ConfigKey) -> String? {
        guard let v = self[key] else { return nil }
        if key.isShortened, v.count > 8 { return String(v.prefix(8)) + "…" }
        return v
    }
}
