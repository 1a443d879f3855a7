import CastCore
import CastMedia

/// castd's command line, parsed without side effects (the CLI then acts on it).
public enum Command: Equatable, Sendable {
    /// `castd --help`: the overview.
    case help
    /// `castd pair --help`, `castd help pair`: one command's help.
    case commandHelp(HelpTopic)
    case version
    case doctor(DoctorOptions)
    case pair(PairOptions)
    case session(SessionOptions)
    case config(ConfigOptions)
    case status(StatusOptions)
    case stop(StopOptions)
    /// `castd --forget-source` alone (issue 31): delete the saved portal choices and exit.
    case forgetSource(CommonOptions)
}

/// The commands `castd help <command>` knows (`session`: the daemon, `castd --session`).
public enum HelpTopic: String, Equatable, Sendable, CaseIterable {
    case session, pair, doctor, config, status, stop
}

/// Options every command that talks to the backend or the screen shares.
public struct CommonOptions: Equatable, Sendable {
    public var apiURL: String? = nil
    public var supabaseURL: String? = nil
    public var supabaseKey: String? = nil
    /// Development only: a PEM file whose certificate(s) castd trusts for HTTPS and WSS
    /// besides the system CA store (`--dev-trust-certificate`, `CASTD_DEV_TRUST_CERTIFICATE`).
    public var devTrustCertificate: String? = nil
    public var logLevel: LogLine.Level = .info
    public var json = false
    /// The configuration keys the command line set, with the flag that set each
    /// (flag > environment > file > default, `ConfigResolver`); filled from the spec's
    /// options by `CommandLineParser.settings`.
    public var settings: [ConfigKey: FlagSetting] = [:]
    public init() {}
}

public struct DoctorOptions: Equatable, Sendable {
    /// `--turn`: test the TURN servers (allocate on each) instead of capture and encoding.
    public var turn = false
    /// `--turn-url URL --turn-user USER [--turn-credential C]`: one bare server instead of
    /// the backend's ice-config (the credential may come from `CASTD_TURN_CREDENTIAL`).
    public var turnURL: String? = nil
    public var turnUser: String? = nil
    public var turnCredential: Redacted<String>? = nil
    public var common = CommonOptions()
    public init() {}
}

public struct PairOptions: Equatable, Sendable {
    public enum Code: Equatable, Sendable {
        case pin(Redacted<String>)
        case url(Redacted<String>)
    }
    public var code: Code
    public var deviceName: String? = nil
    public var common = CommonOptions()
}

public struct SessionOptions: Equatable, Sendable {
    public enum Capture: String, Equatable, Sendable, CaseIterable { case auto, x11, portal, mutter }
    public enum Encoder: String, Equatable, Sendable, CaseIterable { case auto, vaapi, x264 }
    /// `--h264-profile`: which H.264 profile castd offers first (`H264ProfileChoice`).
    public enum H264Profile: String, Equatable, Sendable, CaseIterable { case auto, high, baseline }
    /// auto: desktop audio when PipeWire has a sink to capture (issue 18); off: video only.
    public enum Audio: String, Equatable, Sendable, CaseIterable { case auto, off }
    public var sessionId: String
    public var capture: Capture = .auto
    public var encoder: Encoder = .auto
    public var h264Profile: H264Profile = .auto
    public var display: String? = nil
    public var output: String? = nil
    /// What is shared (issue 31): a monitor (the screen, or `--output`) or one window (`--window`
    /// on X11; through the portal, the window the person picks in its dialog).
    public enum Source: String, Equatable, Sendable, CaseIterable { case monitor, window }
    public var source: Source = .monitor
    /// `--window NAME|ID`: the X11 window to share (an id, the exact title, or a unique part of it).
    public var window: String? = nil
    public var cursor = true
    /// `--no-dmabuf` / `dmabuf = false`: PipeWire frames in shared memory only.
    public var dmabuf = true
    public var audio: Audio = .auto
    /// How long the ScreenCast portal may leave a call unanswered (Start waits for a person at its dialog).
    public var portalTimeout: Duration = .seconds(60)
    public var notify = true
    /// `--forget-source`: delete the portal's saved choices first, so its dialog asks again (issue 31).
    public var forgetSource = false
    /// The ceilings of the cast: spec §12's 1080p30 and §7's 4 Mbit/s, lowered by the
    /// configuration's `max-height`, `max-fps`, `max-bitrate-kbps` (never raised).
    public var caps = CaptureCaps.default
    public var common = CommonOptions()
}

public struct StatusOptions: Equatable, Sendable {
    public var common = CommonOptions()
    public init() {}
}

public struct StopOptions: Equatable, Sendable {
    public var sessionId: String? = nil
    public var common = CommonOptions()
    public init() {}
}

/// `castd config [--json] [--session ID]`: the effective configuration and where each value
/// came from (with `--session`, as that session's daemon would see it: its pairing link).
public struct ConfigOptions: Equatable, Sendable {
    public var sessionId: String? = nil
    public var common = CommonOptions()
    public init() {}
}

extension CastError.Code {
    public static let badArgument = Self("bad_argument")
}

public enum CommandLineParser {
    public static func parse(_ args: [String]) throws -> Command {
        guard !args.isEmpty else { throw CastError(.usage, "no command given; run `castd --help`") }
        if let help = try helpRequest(args) { return help }
        var command = try parseCommand(args)
        // The configuration keys the flags set, read from the spec's options in one place.
        switch command {
        case .session(var o): o.common.settings = settings(args, CastdCommands.spec(.session)); command = .session(o)
        case .pair(var o): o.common.settings = settings(args, CastdCommands.spec(.pair)); command = .pair(o)
        case .doctor(var o): o.common.settings = settings(args, CastdCommands.spec(.doctor)); command = .doctor(o)
        case .config(var o): o.common.settings = settings(args, CastdCommands.spec(.config)); command = .config(o)
        case .help, .commandHelp, .version, .status, .stop, .forgetSource: break
        }
        return command
    }

    /// `castd --help`, `castd help [<command>]`, `castd <command> … --help`; nil when no help is asked for.
    static func helpRequest(_ args: [String]) throws -> Command? {
        let first = args[0]
        if first == "-h" || first == "--help" { return .help }
        if first == "help" {
            guard args.count > 1 else { return .help }
            let word = args[1].hasPrefix("--") ? String(args[1].dropFirst(2)) : args[1]
            guard let topic = HelpTopic(rawValue: word) else {
                throw CastError(.usage, "there is no command `\(LogLine.quote(args[1]))`; commands: "
                                + HelpTopic.allCases.map(\.rawValue).joined(separator: ", "))
            }
            return .commandHelp(topic)
        }
        guard args.dropFirst().contains(where: { $0 == "--help" || $0 == "-h" }) else { return nil }
        if let topic = HelpTopic(rawValue: first), topic != .session { return .commandHelp(topic) }
        return first.hasPrefix("-") ? .commandHelp(.session) : nil
    }

    /// The keys the command line sets: every spec option with a configuration key, with its
    /// value (or, for a flag like `--no-cursor`, the value it stands for). Checked by the parser already.
    static func settings(_ args: [String], _ spec: CommandSpec) -> [ConfigKey: FlagSetting] {
        var out: [ConfigKey: FlagSetting] = [:]
        var rest = args[...]
        while let a = rest.popFirst() {
            guard let option = spec.options.first(where: { $0.flag == a }) else { continue }
            let value: String?
            if case .none = option.value { value = option.setsValue } else { value = rest.popFirst() }
            if let key = option.configKey, let value { out[key] = FlagSetting(flag: a, value: value) }
        }
        return out
    }

    static func parseCommand(_ args: [String]) throws -> Command {
        var rest = args[...]
        let first = args[0]
        switch first {
        case "-V", "--version": return .version
        case "status":
            rest = rest.dropFirst()
            var o = StatusOptions()
            while let a = rest.popFirst() {
                guard a == "--json" else { throw unknown(a) }
                o.common.json = true
            }
            return .status(o)
        case "stop":
            rest = rest.dropFirst()
            var o = StopOptions()
            while let a = rest.popFirst() {
                if a == "--json" { o.common.json = true; continue }
                guard !a.hasPrefix("-") else { throw unknown(a) }
                guard o.sessionId == nil else { throw CastError(.usage, "stop takes at most one session id") }
                guard isUUID(a) else {
                    throw CastError(.badArgument, "stop takes the session id of a running cast (a UUID; `castd status` lists them)")
                }
                o.sessionId = a.lowercased()
            }
            return .stop(o)
        case "config":
            rest = rest.dropFirst()
            var o = ConfigOptions()
            while let a = rest.popFirst() {
                if a == "--session" {
                    let v = try value(a, &rest)
                    guard isUUID(v) else {
                        throw CastError(.badArgument, "--session takes the session id printed by `castd pair` (a UUID)")
                    }
                    o.sessionId = v.lowercased()
                } else if let option = CastdCommands.sessionSettingOptions.first(where: { $0.flag == a }), let key = option.configKey {
                    // The daemon's options that set a key: shown as the daemon would take them
                    // (`settings` records the value).
                    let v = try option.setsValue ?? value(a, &rest)
                    guard case .success = key.normalize(v) else {
                        throw CastError(.badArgument, "\(a) takes \(key.allowedDescription) (got `\(LogLine.quote(v))`)")
                    }
                } else if try !takeCommon(a, &rest, &o.common) {
                    throw unknown(a)
                }
            }
            return .config(o)
        case "doctor":
            rest = rest.dropFirst()
            var o = DoctorOptions()
            while let a = rest.popFirst() {
                switch a {
                case "--turn": o.turn = true
                case "--turn-url": o.turnURL = try value(a, &rest)
                case "--turn-user": o.turnUser = try value(a, &rest)
                case "--turn-credential": o.turnCredential = Redacted(try value(a, &rest))
                default: if try !takeCommon(a, &rest, &o.common) { throw unknown(a) }
                }
            }
            if o.turnURL != nil || o.turnUser != nil || o.turnCredential != nil {
                guard o.turn else { throw CastError(.usage, "--turn-url, --turn-user and --turn-credential go with doctor --turn") }
                guard o.turnURL != nil, o.turnUser != nil else {
                    throw CastError(.usage, "doctor --turn tests one bare server with both --turn-url URL and --turn-user USER (the credential: --turn-credential or CASTD_TURN_CREDENTIAL)")
                }
            }
            return .doctor(o)
        case "pair":
            rest = rest.dropFirst()
            var code: PairOptions.Code? = nil
            var device: String? = nil
            var common = CommonOptions()
            while let a = rest.popFirst() {
                switch a {
                case "--pin":
                    let v = try value(a, &rest)
                    code = .pin(Redacted(v))
                case "--device-name":
                    let v = try value(a, &rest)
                    guard !v.isEmpty, v.count <= 80 else {
                        throw CastError(.badArgument, "--device-name must be 1 to 80 characters (spec §4)")
                    }
                    device = v
                default:
                    if try takeCommon(a, &rest, &common) { continue }
                    // A bare `-`: the pairing URL is read from standard input (PairCommand).
                    if a.hasPrefix("-") && a != "-" { throw unknown(a) }
                    guard code == nil else { throw CastError(.usage, "give either --pin or one pairing URL, not both") }
                    code = .url(Redacted(a))
                }
            }
            guard let code else {
                throw CastError(.usage, "pair needs a PIN (--pin 482913) or the pairing URL from the receiver's QR code")
            }
            var o = PairOptions(code: code)
            o.deviceName = device
            o.common = common
            return .pair(o)
        default:
            var sessionId: String? = nil
            var o = SessionOptions(sessionId: "")
            while let a = rest.popFirst() {
                switch a {
                case "--session": sessionId = try value(a, &rest)
                case "--capture": o.capture = try choice(a, &rest)
                case "--encoder": o.encoder = try choice(a, &rest)
                case "--h264-profile": o.h264Profile = try choice(a, &rest)
                case "--audio": o.audio = try choice(a, &rest)
                case "--display": o.display = try value(a, &rest)
                case "--output": o.output = try value(a, &rest)
                case "--source": o.source = try choice(a, &rest)
                case "--window":
                    let v = try value(a, &rest)
                    guard !v.trimmingWhitespace().isEmpty else {
                        throw CastError(.badArgument, "--window takes a window's title or id (castd doctor lists them)")
                    }
                    o.window = v
                case "--no-cursor": o.cursor = false
                case "--no-dmabuf": o.dmabuf = false
                case "--no-notify": o.notify = false
                case "--forget-source": o.forgetSource = true
                case "--portal-timeout":
                    let v = try value(a, &rest)
                    guard let s = Double(v), s.isFinite, s >= 0.1, s <= 3600 else {
                        throw CastError(.badArgument, "--portal-timeout takes seconds from 0.1 to 3600 (got \(v))")
                    }
                    o.portalTimeout = .milliseconds(Int64((s * 1000).rounded()))
                default:
                    if try !takeCommon(a, &rest, &o.common) { throw unknown(a) }
                }
            }
            guard let sessionId else {
                guard o.forgetSource else { throw unknown(first) }
                // Alone, --forget-source is its own small command; with --session it forgets, then casts.
                var bare = SessionOptions(sessionId: "")
                bare.forgetSource = true
                bare.common = o.common
                guard o == bare else {
                    throw CastError(.usage, "castd --forget-source alone only forgets the saved choices; to forget them and cast, add --session ID")
                }
                return .forgetSource(o.common)
            }
            // --window names the window to share, so it implies --source window.
            if o.window != nil {
                guard o.source == .window || !args.contains("--source") else {
                    throw CastError(.usage, "--window shares one window; it cannot go with --source monitor")
                }
                o.source = .window
            }
            if o.output != nil && o.source == .window {
                throw CastError(.usage, "--output picks a monitor; it cannot go with --source window or --window")
            }
            guard isUUID(sessionId) else {
                throw CastError(.badArgument, "--session takes the session id printed by `castd pair` (a UUID)")
            }
            o.sessionId = sessionId.lowercased()
            return .session(o)
        }
    }

    /// Options shared by every command; false when `a` is not one of them.
    static func takeCommon(_ a: String, _ rest: inout ArraySlice<String>, _ c: inout CommonOptions) throws -> Bool {
        switch a {
        case "--api-url": c.apiURL = try url(a, .apiURL, &rest)
        case "--supabase-url": c.supabaseURL = try url(a, .supabaseURL, &rest)
        case "--supabase-key": c.supabaseKey = try value(a, &rest)
        case "--dev-trust-certificate":
            let v = try value(a, &rest)
            guard !v.isEmpty else { throw CastError(.badArgument, "--dev-trust-certificate takes the path of a PEM file") }
            c.devTrustCertificate = v
        case "--json": c.json = true
        case "--log-level": c.logLevel = try choice(a, &rest)
        default: return false
        }
        return true
    }

    /// A URL flag's value, checked as the config file checks it.
    static func url(_ flag: String, _ key: ConfigKey, _ rest: inout ArraySlice<String>) throws -> String {
        let v = try value(flag, &rest)
        guard case .success(let u) = key.normalize(v) else {
            throw CastError(.badArgument, "\(flag) takes \(key.allowedDescription) (got `\(LogLine.quote(v))`)")
        }
        return u
    }

    /// One of an option's fixed choices (`--capture auto|x11|portal|mutter`), or a sentence naming
    /// them in their declared order ("--capture takes auto, x11, portal or mutter (got v)").
    static func choice<T: RawRepresentable & CaseIterable>(_ flag: String, _ rest: inout ArraySlice<String>) throws -> T
    where T.RawValue == String {
        let v = try value(flag, &rest)
        guard let c = T(rawValue: v) else {
            throw CastError(.badArgument, "\(flag) takes \(ConfigKey.list(T.allCases.map(\.rawValue))) (got \(v))")
        }
        return c
    }

    static func value(_ flag: String, _ rest: inout ArraySlice<String>) throws -> String {
        guard let v = rest.popFirst(), !v.hasPrefix("--") else {
            throw CastError(.usage, "\(flag) needs a value")
        }
        return v
    }

    static func unknown(_ a: String) -> CastError {
        CastError(.usage, "unknown command or option `\(LogLine.quote(a))`; run `castd --help`")
    }

    /// 8-4-4-4-12 hexadecimal digits.
    public static func isUUID(_ s: String) -> Bool {
        let parts = s.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.map(\.count) == [8, 4, 4, 4, 12] else { return false }
        return parts.allSatisfy { $0.allSatisfy(\.isHexDigit) }
    }
}
