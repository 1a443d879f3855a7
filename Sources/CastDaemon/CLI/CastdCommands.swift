import CastCore

/// The data of castd's command line (CommandSpec): what `--help`, `castd help <command>`,
/// the man pages and the completions say. Add an option here and in `CommandLineParser`;
/// `CommandSpecTests` fails until both agree (docs/cli.md).
enum CastdCommands {
    static let all: [CommandSpec] = [session, pair, doctor, config, status, stop]

    static func spec(_ topic: HelpTopic) -> CommandSpec {
        switch topic {
        case .session: session
        case .pair: pair
        case .doctor: doctor
        case .config: config
        case .status: status
        case .stop: stop
        }
    }

    // MARK: shared parts

    static let backendOptions: [OptionSpec] = [
        OptionSpec(flag: "--api-url", value: .text("URL", sample: "https://api.example.test"),
                   help: "Base URL of the iPadCast API (/api/public/*).", configKey: .apiURL),
        OptionSpec(flag: "--supabase-url", value: .text("URL", sample: "https://project.example.test"),
                   help: "Base URL of Supabase (Auth, REST, Realtime).", configKey: .supabaseURL),
        OptionSpec(flag: "--supabase-key", value: .text("KEY", sample: "sb_publishable_sample"),
                   help: "The Supabase publishable key (public by design).", configKey: .supabaseKey),
        OptionSpec(flag: "--dev-trust-certificate", value: .file("PEM"),
                   help: "DEVELOPMENT ONLY: also trust the certificate(s) in this PEM file (e.g. a self-signed local backend) for HTTPS, WSS and TURN over TLS, besides the system CAs; host names are still checked and castd warns on every start (env CASTD_DEV_TRUST_CERTIFICATE). Verification can never be turned off."),
        OptionSpec(flag: "--log-level", value: .choice(LogLine.Level.allCases.map(\.rawValue)),
                   help: "The least important log events written (default info)."),
    ]

    static let json = OptionSpec(flag: "--json", help: "Print one JSON object per line instead of sentences (for launchers and scripts).")

    static let backendEnvironment: [(name: String, help: String)] = [
        (ConfigKey.apiURL.environmentName, "Base URL of the iPadCast API; overrides the config file, a flag overrides it."),
        (ConfigKey.supabaseURL.environmentName, "Base URL of Supabase."),
        (ConfigKey.supabaseKey.environmentName, "The publishable key."),
        ("CASTD_DEV_TRUST_CERTIFICATE", "As --dev-trust-certificate (development only)."),
        ("XDG_CONFIG_HOME", "Where the config file is: $XDG_CONFIG_HOME/castd/config (default ~/.config/castd/config)."),
        ("XDG_STATE_HOME", "Where the identity is kept: $XDG_STATE_HOME/castd/ (default ~/.local/state/castd/)."),
    ]

    static let exitCodes: [(code: Int32, help: String)] = [
        (CLI.ExitCode.ok, "success (a cast ended cleanly, a pairing was approved)"),
        (CLI.ExitCode.failure, "the cast or pairing failed; the message says why (the unit restarts on it)"),
        (CLI.ExitCode.usage, "bad command line or configuration"),
        (CLI.ExitCode.sessionOver, "the session is over for good (already ended, expired, denied, authorization expired, the receiver gave up, or castd has no identity yet): pair again; the unit does not restart on it"),
        (CLI.ExitCode.unavailable, "the requested part is not available in this build"),
    ]

    static let configFile = (path: "~/.config/castd/config", help: "The configuration file (castd.conf(5)); $XDG_CONFIG_HOME/castd/config when XDG_CONFIG_HOME is set.")
    static let stateDir = (path: "~/.local/state/castd/", help: "The sender identity (credentials.json), the portal's restore token and the pairing links' origins; directory 0700, files 0600 ($XDG_STATE_HOME/castd/ when set).")

    // MARK: the commands

    static let session = CommandSpec(
        name: nil,
        summary: "cast this Linux screen to an iPadCast receiver",
        synopsis: ["--session ID [OPTION]…", "pair (--pin PIN | URL) [OPTION]…", "doctor [--json] [--turn …]",
                   "config [--json]", "status [--json]", "stop [ID] [--json]", "--forget-source [--json]", "help [COMMAND]",
                   "--help | --version"],
        description: [
            "castd is the sender of an iPadCast session: it captures this screen (and, by default, its audio), encodes it as H.264 (VA-API or x264, VP8 when the receiver asks for it) and sends it over WebRTC to the Chrome receiver that approved the pairing.",
            "`castd --session ID` runs the cast for a session paired with `castd pair`: it signs in with the stored identity, waits for the receiver's approval and answer, casts until the receiver or a signal ends it, and reconnects on its own after a network failure. It runs in the foreground, or as the systemd user unit castd@ID.service (Type=notify, with a watchdog).",
            "Each option that names a configuration key can also be set in the environment (CASTD_<KEY>) or in the config file (castd.conf(5)): a flag wins over the environment, the environment over the file.",
        ],
        options: [
            OptionSpec(flag: "--session", value: .text("ID", sample: "7f0c9a12-3b4c-4d5e-8f60-718293a4b5c6"),
                       help: "The session id printed by `castd pair` (a UUID). Required."),
            OptionSpec(flag: "--capture", value: .choice(SessionOptions.Capture.allCases.map(\.rawValue)),
                       help: "Capture backend. auto: GNOME's Mutter ScreenCast in a Wayland session when it answers, else the ScreenCast portal; XShm under X11 (`castd doctor` says which and why).",
                       configKey: .capture),
            OptionSpec(flag: "--source", value: .choice(["monitor", "window"]),
                       help: "What to cast: a whole monitor (default) or one window (--window).", configKey: .source),
            OptionSpec(flag: "--window", value: .text("NAME|ID", sample: "Slides"),
                       help: "The window to cast with --source window: its title (or part of it) or its id.", configKey: .window),
            OptionSpec(flag: "--output", value: .text("NAME", sample: "HDMI-1"),
                       help: "The X11 output or Mutter connector to cast (default: the whole screen).", configKey: .output),
            OptionSpec(flag: "--display", value: .text(":N", sample: ":0"),
                       help: "The X11 display to capture (default: $DISPLAY).", configKey: .display),
            OptionSpec(flag: "--encoder", value: .choice(SessionOptions.Encoder.allCases.map(\.rawValue)),
                       help: "H.264 encoder. auto: VA-API, falling back to x264; vaapi refuses to start without it.",
                       configKey: .encoder),
            OptionSpec(flag: "--h264-profile", value: .choice(SessionOptions.H264Profile.allCases.map(\.rawValue)),
                       help: "Which H.264 profile to ask the receiver for first. high: High (sharper text for fewer bits where the receiver decodes it), with Constrained Baseline offered too for receivers that cannot; baseline: Constrained Baseline only; auto (default): Constrained Baseline first, High after it (High was measured sharper for fewer bits, but with a later 95th percentile on scrolling text).",
                       configKey: .h264Profile),
            OptionSpec(flag: "--audio", value: .choice(SessionOptions.Audio.allCases.map(\.rawValue)),
                       help: "Desktop audio. auto: Opus from the default sink's monitor when PipeWire has one and the receiver takes audio; otherwise video only, said once in the log.",
                       configKey: .audio),
            OptionSpec(flag: "--no-cursor", help: "Leave the mouse pointer out of the picture.", configKey: .cursor, setsValue: "false"),
            OptionSpec(flag: "--no-dmabuf", help: "Wayland: take frames in shared memory only, never GPU (DMA-BUF) buffers.", configKey: .dmabuf, setsValue: "false"),
            OptionSpec(flag: "--no-notify", help: "No desktop notifications when the cast starts and ends.", configKey: .notify, setsValue: "false"),
            OptionSpec(flag: "--portal-timeout", value: .text("SECONDS", sample: "60"),
                       help: "How long the ScreenCast portal may wait for someone to accept its dialog (0.1 to 3600, default 60); then the cast ends with disconnect reason capture_needs_user and exit 1."),
            OptionSpec(flag: "--forget-source",
                       help: "Delete the ScreenCast portal's saved choices (the monitor's and the window's restore tokens) so that its dialog asks again; says what was forgotten. Alone (`castd --forget-source`) it only does that and exits; with --session it does it before the cast."),
        ] + backendOptions + [json],
        environment: ConfigKey.allCases.filter { ![.apiURL, .supabaseURL, .supabaseKey].contains($0) }
            .map { ($0.environmentName, "As the config key \($0.rawValue) (castd.conf(5)).") } + backendEnvironment
            + [("JOURNAL_STREAM", "Set by systemd: castd then logs to the journal with structured fields."),
               ("WATCHDOG_USEC", "Set by systemd (WatchdogSec=): castd feeds the watchdog while it makes progress.")],
        exitCodes: exitCodes,
        signals: [("SIGTERM, SIGINT", "End the cast cleanly: the disconnect row and the session's end are sent, and castd exits 0 within 2 s. A second signal exits at once.")],
        files: [configFile, stateDir],
        examples: [("castd pair --pin 482913", "Pair with the receiver showing PIN 482913; prints the session id once it is approved."),
                   ("castd --session 7f0c9a12-3b4c-4d5e-8f60-718293a4b5c6", "Cast to that session until the receiver stops it."),
                   ("systemctl --user start castd@7f0c9a12-3b4c-4d5e-8f60-718293a4b5c6", "The same, as a systemd user unit."),
                   ("castd --session ID --audio off --capture x11", "Video only, from the X11 screen."),
                   ("castd --forget-source", "Forget the monitor or window picked in the portal's dialog; the next cast asks again.")])

    /// The daemon's lines in `castd --help`'s usage (the other commands' lines are their own synopses).
    static let daemonOverview = ["--session ID [OPTION]…", "--forget-source [--json]"]

    /// The daemon's options that set a configuration key (`castd config` takes them too).
    static var sessionSettingOptions: [OptionSpec] {
        session.options.filter { $0.configKey != nil && !backendOptions.map(\.flag).contains($0.flag) }
    }

    static let pair = CommandSpec(
        name: "pair",
        summary: "pair with an iPadCast receiver by PIN or QR link",
        synopsis: ["pair --pin PIN [--device-name NAME] [--json]", "pair --pin - [OPTION]…",
                   "pair URL [--device-name NAME] [--json]", "pair - [OPTION]…"],
        description: [
            "Signs in (an anonymous identity, created once per user and kept in the state directory), pairs with the receiver that shows the PIN or the QR code, prints the session id and waits for the receiver's Approve or Deny.",
            "The PIN and the link are secrets: give `-` to read them from standard input (one line) instead of the command line, where every local user can see them. castd never prints them.",
            "A QR link carries its backend's origin: unless api-url is set (flag, environment or config file), castd pairs with that origin and records it, so `castd --session ID` for that session uses it too.",
        ],
        options: [
            OptionSpec(flag: "--pin", value: .text("PIN", sample: "482913"),
                       help: "The 6-digit PIN the receiver shows (spaces allowed); `-` reads it from standard input."),
            OptionSpec(flag: "--device-name", value: .text("NAME", sample: "Desk"),
                       help: "The name the receiver shows for this computer (1 to 80 characters; default: the host name)."),
        ] + backendOptions + [json],
        operands: [("URL", "The pairing link from the receiver's QR code (https://…/pair?t=…&s=…); `-` reads it from standard input.")],
        environment: backendEnvironment,
        exitCodes: exitCodes,
        files: [configFile, stateDir],
        examples: [("castd pair --pin 482913", "Pair by PIN."),
                   ("printf '%s\\n' \"$pin\" | castd pair --pin - --json", "Pair with the PIN on standard input, as the launcher does."),
                   ("castd pair - < link.txt", "Pair with a QR link kept in a file.")])

    static let doctor = CommandSpec(
        name: "doctor",
        summary: "say what this machine can capture and encode, and why not",
        synopsis: ["doctor [--json]", "doctor --turn [--json] [--turn-url URL --turn-user USER [--turn-credential C]]"],
        description: [
            "Lists the display server, each capture backend and encoder with a sentence saying whether it works here and why not, the caps that apply (after the configuration's max-height, max-fps and max-bitrate-kbps), the video codecs castd would offer, audio, what it does with DMA-BUF screen buffers, and the libraries it runs with. Exits 1 when nothing can cast here.",
            "With --turn, allocates once on each TURN server of the backend's ice-config (as the paired sender), or on the one server given, and prints the relayed address or why not; credentials are never printed. Exits 1 when no server works.",
        ],
        options: [
            OptionSpec(flag: "--turn", help: "Test the TURN servers instead of capture and encoding."),
            OptionSpec(flag: "--turn-url", value: .text("URL", sample: "turn:127.0.0.1:3478"),
                       help: "With --turn: test this one server instead of the backend's ice-config."),
            OptionSpec(flag: "--turn-user", value: .text("USER", sample: "castd"), help: "The TURN user name for --turn-url."),
            OptionSpec(flag: "--turn-credential", value: .text("C", sample: "secret"),
                       help: "The TURN credential for --turn-url; prefer the environment variable CASTD_TURN_CREDENTIAL, which other users cannot see."),
        ] + backendOptions + [json],
        environment: backendEnvironment + [("CASTD_TURN_CREDENTIAL", "The credential for --turn-url.")],
        exitCodes: [(CLI.ExitCode.ok, "something can cast here (with --turn: a TURN server allocated)"),
                    (CLI.ExitCode.failure, "nothing can cast here (with --turn: no server worked)"),
                    (CLI.ExitCode.usage, "bad command line or configuration")],
        files: [configFile],
        examples: [("castd doctor", "What works here."), ("castd doctor --turn", "Whether the backend's TURN servers answer.")])

    static let config = CommandSpec(
        name: "config",
        summary: "print the effective configuration and where each value came from",
        synopsis: ["config [--json] [--session ID] [OPTION]…"],
        description: [
            "Prints every configuration key (castd.conf(5)) with its effective value and its source: a flag, an environment variable, the config file and line, the pairing link, or the default. Flags given to it count as they would for the daemon.",
            "The publishable key is public by design but printed shortened (its first 8 characters); castd keeps no other secret in its configuration, and never prints tokens.",
        ],
        options: [
            OptionSpec(flag: "--session", value: .text("ID", sample: "7f0c9a12-3b4c-4d5e-8f60-718293a4b5c6"),
                       help: "Show the configuration as that session's daemon sees it (the API URL recorded from its pairing link)."),
        ] + sessionSettingOptions + backendOptions + [json],
        environment: ConfigKey.allCases.map { ($0.environmentName, "Sets \($0.rawValue).") } + backendEnvironment.suffix(3),
        exitCodes: [(CLI.ExitCode.ok, "the configuration is valid"),
                    (CLI.ExitCode.usage, "the config file or a variable is invalid; the message names the line or the variable")],
        files: [configFile],
        examples: [("castd config", "The effective configuration."),
                   ("CASTD_MAX_FPS=15 castd config --json", "What the environment changes, for a script.")])

    static let status = CommandSpec(
        name: "status",
        summary: "list the casts running on this machine for this user",
        synopsis: ["status [--json]"],
        description: ["Lists each running `castd --session`: its session id, process id, since when it runs, its state, what it shares (a screen, a monitor or a window) and whether audio is sent."],
        options: [json],
        environment: [("XDG_RUNTIME_DIR", "Where running casts register: $XDG_RUNTIME_DIR/castd/.")],
        exitCodes: [(CLI.ExitCode.ok, "the list was printed (it may be empty)"), (CLI.ExitCode.failure, "the list could not be read")],
        examples: [("castd status", "What is being cast now.")])

    static let stop = CommandSpec(
        name: "stop",
        summary: "end a running cast cleanly",
        synopsis: ["stop [ID] [--json]"],
        description: ["Ends the running cast of session ID as SIGTERM does: the receiver is told (the disconnect row and the session's end) and the daemon exits 0. Without ID, ends the only running cast; with several running, names them and does nothing."],
        options: [json],
        operands: [("ID", "The session id of a running cast (`castd status` lists them).")],
        environment: [("XDG_RUNTIME_DIR", "Where running casts register: $XDG_RUNTIME_DIR/castd/.")],
        exitCodes: [(CLI.ExitCode.ok, "the cast ended"), (CLI.ExitCode.failure, "no such cast, several and no ID, or it did not end"),
                    (CLI.ExitCode.usage, "bad command line")],
        examples: [("castd stop", "End the cast.")])
}
