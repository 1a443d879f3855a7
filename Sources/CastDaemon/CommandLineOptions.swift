import CastCore

/// castd's command line, parsed without side effects (the CLI then acts on it).
public enum Command: Equatable, Sendable {
    case help
    case version
    case doctor(DoctorOptions)
    case pair(PairOptions)
    case session(SessionOptions)
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
    /// auto: desktop audio when PipeWire has a sink to capture (issue 18); off: video only.
    public enum Audio: String, Equatable, Sendable, CaseIterable { case auto, off }
    public var sessionId: String
    public var capture: Capture = .auto
    public var encoder: Encoder = .auto
    public var display: String? = nil
    public var output: String? = nil
    /// What is shared (issue 31): a monitor (the screen, or `--output`) or one window (`--window`
    /// on X11; through the portal, the window the person picks in its dialog).
    public enum Source: String, Equatable, Sendable, CaseIterable { case monitor, window }
    public var source: Source = .monitor
    /// `--window NAME|ID`: the X11 window to share (an id, the exact title, or a unique part of it).
    public var window: String? = nil
    public var cursor = true
    public var audio: Audio = .auto
    /// How long the ScreenCast portal may leave a call unanswered (Start waits for a person at its dialog).
    public var portalTimeout: Duration = .seconds(60)
    public var common = CommonOptions()
}

extension CastError.Code {
    public static let badArgument = Self("bad_argument")
}

public enum CommandLineParser {
    public static func parse(_ args: [String]) throws -> Command {
        var rest = args[...]
        guard let first = rest.first else { throw CastError(.usage, "no command given; run `castd --help`") }
        switch first {
        case "-h", "--help", "help": return .help
        case "-V", "--version": return .version
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
                    if a.hasPrefix("-") { throw unknown(a) }
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
                case "--capture":
                    let v = try value(a, &rest)
                    guard let c = SessionOptions.Capture(rawValue: v) else {
                        throw CastError(.badArgument, "--capture takes auto, x11, portal or mutter (got \(v))")
                    }
                    o.capture = c
                case "--encoder":
                    let v = try value(a, &rest)
                    guard let e = SessionOptions.Encoder(rawValue: v) else {
                        throw CastError(.badArgument, "--encoder takes auto, vaapi or x264 (got \(v))")
                    }
                    o.encoder = e
                case "--audio":
                    let v = try value(a, &rest)
                    guard let au = SessionOptions.Audio(rawValue: v) else {
                        throw CastError(.badArgument, "--audio takes auto or off (got \(v))")
                    }
                    o.audio = au
                case "--display": o.display = try value(a, &rest)
                case "--output": o.output = try value(a, &rest)
                case "--source":
                    let v = try value(a, &rest)
                    guard let src = SessionOptions.Source(rawValue: v) else {
                        throw CastError(.badArgument, "--source takes monitor or window (got \(v))")
                    }
                    o.source = src
                case "--window":
                    let v = try value(a, &rest)
                    guard !v.trimmingWhitespace().isEmpty else {
                        throw CastError(.badArgument, "--window takes a window's title or id (castd doctor lists them)")
                    }
                    o.window = v
                case "--no-cursor": o.cursor = false
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
            guard let sessionId else { throw unknown(first) }
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
        case "--api-url": c.apiURL = try value(a, &rest)
        case "--supabase-url": c.supabaseURL = try value(a, &rest)
        case "--supabase-key": c.supabaseKey = try value(a, &rest)
        case "--dev-trust-certificate":
            let v = try value(a, &rest)
            guard !v.isEmpty else { throw CastError(.badArgument, "--dev-trust-certificate takes the path of a PEM file") }
            c.devTrustCertificate = v
        case "--json": c.json = true
        case "--log-level":
            let v = try value(a, &rest)
            guard let l = LogLine.Level(rawValue: v) else {
                throw CastError(.badArgument, "--log-level takes debug, info, notice, warning or error (got \(v))")
            }
            c.logLevel = l
        default: return false
        }
        return true
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
