import CastCore

#if canImport(Glibc)
import Glibc
#endif

/// castd's command line: parse, configure, run. Exit codes are part of the
/// interface (documented in `--help` and the README).
public enum CLI {
    public enum ExitCode {
        public static let ok: Int32 = 0
        /// The cast or pairing failed (network, receiver, backend).
        public static let failure: Int32 = 1
        /// Bad command line or configuration.
        public static let usage: Int32 = 2
        /// The session is over for good (already ended, expired, denied, authorization
        /// expired, the receiver gave up): only a new pairing helps, so the systemd unit
        /// does not restart on it (`RestartPreventExitStatus=`).
        public static let sessionOver: Int32 = 3
        /// A part of castd that is not built yet was asked for.
        public static let unavailable: Int32 = 69
    }

    public static let helpText = """
    castd \(CastdVersion.string) — cast this Linux screen to an iPadCast Chrome receiver.

    Usage:
      castd pair --pin 482913 [--device-name NAME] [--json]
      castd pair 'https://…/pair?t=<token>&s=<session id>' [--device-name NAME] [--json]
      castd --session <id>      run the sender daemon for a paired, approved session
      castd doctor [--json]     what this machine can capture and encode, and why not
                                (exit 1 when nothing can cast here)
      castd doctor --turn [--json] [--turn-url URL --turn-user USER [--turn-credential C]]
                                allocate on each TURN server of the backend's ice-config (as
                                the paired sender), or on the one server given (credential also
                                from env CASTD_TURN_CREDENTIAL): the relayed address or why not;
                                credentials are never printed (exit 1 when none works)
      castd --help | --version

    Configuration (environment; `Scripts/devstack up` prints these for the local stack):
      CASTD_API_URL          base URL of the iPadCast API (/api/public/*)
      CASTD_SUPABASE_URL     base URL of Supabase (Auth, REST, Realtime)
      CASTD_SUPABASE_KEY     the publishable key (public by design)

    Exit codes:
      0   success (a cast ended cleanly, a pairing was approved)
      1   the cast or pairing failed; the message says why (the unit restarts on it)
      2   bad command line or configuration
      3   the session is over for good (already ended, expired, denied, authorization
          expired, the receiver gave up): pair again; the unit does not restart on it
      69  the requested part is not available in this build

    Options of --session:
      --capture auto|x11|portal|mutter   capture backend (auto: in a Wayland session GNOME's
                                         Mutter ScreenCast when it answers, else the ScreenCast
                                         portal; XShm otherwise; `castd doctor` says which and why)
      --encoder auto|vaapi|x264          H.264 encoder (auto: VA-API, falling back to x264)
      --audio auto|off                   desktop audio (auto: Opus from the default sink's monitor
                                         when PipeWire has one and the receiver takes audio;
                                         otherwise video only, said once in the log)
      --display :N   --output NAME   --no-cursor   (--output: an X11 output or a Mutter connector)
      --source monitor|window   --window NAME|ID   share one monitor (default) or one window:
                                         on X11 the window by id or title (castd doctor lists both),
                                         through the portal the one picked in its dialog
      --portal-timeout SECONDS           how long the ScreenCast portal may wait for someone to
                                         accept its dialog (default 60); then castd ends the cast
                                         with disconnect reason capture_needs_user and exit 1
    Common options: --api-url URL --supabase-url URL --supabase-key KEY --log-level LEVEL --json
      --dev-trust-certificate PEM   DEVELOPMENT ONLY: also trust the certificate(s) in this PEM
                                    file (e.g. a self-signed backend) for HTTPS, WSS and TURN
                                    over TLS (turns:), besides the system CAs; host names are
                                    still checked; castd warns on every start (env
                                    CASTD_DEV_TRUST_CERTIFICATE). HTTPS, WSS and TLS to TURN are
                                    always verified; there is no way to turn that off.

    Signals: SIGTERM or SIGINT ends a cast cleanly (disconnect row, session end,
    exit 0 within 2 s); a second signal exits at once.
    Credentials: $XDG_STATE_HOME/castd/ (default ~/.local/state/castd/), mode 0600.
    """

    public static func run(arguments: [String], environment: [String: String]) async -> Int32 {
        var out = StandardStream.out
        var err = StandardStream.err
        if arguments.first == "dev-send" {
            // A developer command (not in --help): the send path against a receiver fed by stdin.
            do { return await DevSend.run(try DevSend.parse(Array(arguments.dropFirst()))) }
            catch { print("castd: \(error)", to: &err); return ExitCode.usage }
        }
        let command: Command
        do {
            command = try CommandLineParser.parse(arguments)
        } catch let e as CastError {
            print("castd: \(e.message)", to: &err)
            return ExitCode.usage
        } catch {
            print("castd: \(error)", to: &err)
            return ExitCode.usage
        }
        switch command {
        case .help:
            print(helpText, to: &out)
            return ExitCode.ok
        case .version:
            print("castd \(CastdVersion.string)", to: &out)
            return ExitCode.ok
        case .pair(let o):
            return await PairCommand.run(o, environment: environment)
        case .session(let o):
            return await SessionCommand.run(o, environment: environment)
        case .doctor(let o):
            if o.turn { return await TURNDoctor.run(o, environment: environment) }
            return DoctorCommand.run(o.common, environment: environment)
        }
    }
}

/// stdout/stderr as `TextOutputStream`s (the only place castd writes to them).
public struct StandardStream: TextOutputStream {
    let fd: Int32
    public static var out: StandardStream { StandardStream(fd: 1) }
    public static var err: StandardStream { StandardStream(fd: 2) }
    /// Writes `line` and its newline in one write(2): lines from several
    /// threads (log events, the final sentence) never interleave on a pipe.
    public mutating func writeLine(_ line: String) { write(line + "\n") }

    public mutating func write(_ string: String) {
        var s = string
        s.withUTF8 { writeAll(fd, UnsafeRawBufferPointer($0)) }
    }
}
