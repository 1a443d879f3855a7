import CastCore

/// A key of castd's configuration (docs/configuration.md). Each has a line in the config
/// file (`capture = x11`), an environment variable (`CASTD_CAPTURE`) and, for most, a flag;
/// precedence is flag > environment > file > default (`ConfigResolver`).
public enum ConfigKey: String, CaseIterable, Sendable, Comparable {
    case apiURL = "api-url"
    case supabaseURL = "supabase-url"
    case supabaseKey = "supabase-key"
    case capture, output, display, source, window, encoder
    case h264Profile = "h264-profile"
    case audio, cursor, notify, dmabuf
    case maxFPS = "max-fps"
    case maxBitrateKbps = "max-bitrate-kbps"
    case maxHeight = "max-height"

    public static func < (a: ConfigKey, b: ConfigKey) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
    }

    /// What values a key takes.
    enum Kind: Equatable, Sendable {
        /// An `http://` or `https://` URL with a host.
        case url
        case text
        case choice([String])
        /// `true` or `false` (also `yes`/`no`, `on`/`off`).
        case bool
        case integer(ClosedRange<Int>)
    }

    /// `CASTD_MAX_FPS` for `max-fps`.
    public var environmentName: String {
        "CASTD_" + String(rawValue.uppercased().map { $0 == "-" ? "_" : $0 })
    }

    var kind: Kind {
        switch self {
        case .apiURL, .supabaseURL: .url
        case .supabaseKey, .output, .display, .window: .text
        case .capture: .choice(SessionOptions.Capture.allCases.map(\.rawValue))
        case .encoder: .choice(SessionOptions.Encoder.allCases.map(\.rawValue))
        case .h264Profile: .choice(SessionOptions.H264Profile.allCases.map(\.rawValue))
        case .audio: .choice(SessionOptions.Audio.allCases.map(\.rawValue))
        // Implemented by the window/monitor choice (docs/capture-sources.md).
        case .source: .choice(["monitor", "window"])
        case .cursor, .notify, .dmabuf: .bool
        // spec §12: "Cap at 1080p30"; §7: ≈ 4 Mbit/s at 1080p. The caps only lower these.
        case .maxFPS: .integer(1...30)
        case .maxBitrateKbps: .integer(150...4000)
        case .maxHeight: .integer(144...1080)
        }
    }

    /// The production backend named in the spec (§3's pair link, §5's Supabase project);
    /// the publishable key has no default (the spec does not give it).
    static let productionAPIURL = "https://sideview.svry.co"
    static let productionSupabaseURL = "https://sxhxcjoqxrauycxizing.supabase.co"

    /// The value when nothing sets the key; nil: unset (castd decides, or it is required).
    var defaultValue: String? {
        switch self {
        case .apiURL: Self.productionAPIURL
        case .supabaseURL: Self.productionSupabaseURL
        case .supabaseKey, .output, .display, .window: nil
        case .capture, .encoder, .h264Profile, .audio: "auto"
        case .source: "monitor"
        case .cursor, .notify, .dmabuf: "true"
        case .maxFPS: "30"
        case .maxBitrateKbps: "4000"
        case .maxHeight: "1080"
        }
    }

    /// What happens when nothing sets the key, in words (castd.conf(5)).
    var defaultDescription: String {
        switch self {
        case .apiURL: "\(Self.productionAPIURL) (the production backend)"
        case .supabaseURL: "\(Self.productionSupabaseURL) (the production project)"
        case .supabaseKey: "none: castd asks for it"
        case .output: "the whole screen"
        case .display: "$DISPLAY"
        case .window: "none"
        default: defaultValue ?? "none"
        }
    }

    /// For `castd config` and the man page: the value as a person may see it.
    var isShortened: Bool { self == .supabaseKey }

    /// One sentence for castd.conf(5) and `castd config`.
    var help: String {
        switch self {
        case .apiURL: "Base URL of the iPadCast API (/api/public/*). When it is not set, a session paired with `castd pair URL` uses the pairing link's origin."
        case .supabaseURL: "Base URL of Supabase (Auth, REST, Realtime)."
        case .supabaseKey: "The Supabase publishable key (public by design, but required: there is no default)."
        case .capture: "Capture backend: auto (Mutter ScreenCast or the portal in a Wayland session, XShm under X11), x11, portal or mutter."
        case .output: "The X11 output or Mutter connector to cast (e.g. HDMI-1)."
        case .display: "The X11 display to capture (e.g. :0)."
        case .source: "What to cast: monitor (a whole screen) or window (one window, see `window`)."
        case .window: "The window to cast when source is window: its title (or part of it) or its id."
        case .encoder: "H.264 encoder: auto (VA-API, falling back to x264), vaapi or x264."
        case .h264Profile: "H.264 profile castd asks for first: auto (Constrained Baseline first, High after it: High was sharper for fewer bits but slower at the 95th percentile on scrolling text), high, or baseline (Constrained Baseline only). A receiver that cannot decode High gets Constrained Baseline either way."
        case .audio: "Desktop audio: auto (sent when PipeWire has a sink to capture and the receiver takes audio) or off."
        case .cursor: "Draw the mouse pointer into the picture (true or false)."
        case .notify: "Desktop notifications when a cast starts and ends (true or false)."
        case .dmabuf: "On Wayland, take GPU (DMA-BUF, linear) frames from the compositor when it offers them, shared memory otherwise (true); false takes shared memory only, for a desktop where reading GPU buffers is slow."
        case .maxFPS: "Highest frame rate, 1 to 30 (the spec's cap is 30)."
        case .maxBitrateKbps: "Highest video bitrate in kbit/s, 150 to 4000 (the spec's cap is 4000 at 1080p, 2500 at 720p and below)."
        case .maxHeight: "Highest picture height in pixels, 144 to 1080; the width follows at 16:9 and the aspect ratio is kept."
        }
    }

    /// `auto, x11, portal or mutter` (for error sentences).
    var allowedDescription: String {
        switch kind {
        case .url: "an http:// or https:// URL"
        case .text: "a non-empty value"
        case .choice(let c): Self.list(c)
        case .bool: "true or false"
        case .integer(let r): "a whole number from \(r.lowerBound) to \(r.upperBound)"
        }
    }

    /// "a, b or c".
    static func list(_ items: [String]) -> String {
        items.count <= 1 ? items.joined() : items.dropLast().joined(separator: ", ") + " or " + items.last!
    }

    /// The value in its normal form (`yes` → `true`, `08` → `8`), or a sentence saying what
    /// the key takes.
    func normalize(_ raw: String) -> Result<String, ValueError> {
        let v = raw
        let bad = ValueError(key: self, got: raw)
        switch kind {
        case .url:
            let lower = v.lowercased()
            guard lower.hasPrefix("https://") || lower.hasPrefix("http://") else { return .failure(bad) }
            let rest = v.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false)
            guard rest.count >= 3, !rest[2].isEmpty, !v.contains(where: \.isWhitespace) else { return .failure(bad) }
            return .success(v.hasSuffix("/") ? String(v.dropLast()) : v)
        case .text:
            return v.isEmpty ? .failure(bad) : .success(v)
        case .choice(let c):
            return c.contains(v) ? .success(v) : .failure(bad)
        case .bool:
            switch v.lowercased() {
            case "true", "yes", "on", "1": return .success("true")
            case "false", "no", "off", "0": return .success("false")
            default: return .failure(bad)
            }
        case .integer(let r):
            guard let n = Int(v), r.contains(n) else { return .failure(bad) }
            return .success(String(n))
        }
    }

    struct ValueError: Error, Equatable, Sendable {
        var key: ConfigKey
        var got: String
        /// "max-fps takes a whole number from 1 to 30 (got `60`)".
        var sentence: String {
            "\(key.rawValue) takes \(key.allowedDescription) (got \(got.isEmpty ? "nothing" : "`\(LogLine.quote(got))`"))"
        }
    }
}
