import CastCore
import CastSession

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
        public static let sessionOver: Int32 = SessionMachine.sessionOverExitCode
        /// A part of castd that is not built yet was asked for.
        public static let unavailable: Int32 = 69
    }

    /// `castd --help`, rendered from the command spec (CastdCommands).
    public static var helpText: String { HelpRenderer.overview() }

    public static func run(arguments: [String], environment: [String: String]) async -> Int32 {
        var out = StandardStream.out
        var err = StandardStream.err
        if arguments.first == "dev-send" {
            // A developer command (not in --help): the send path against a receiver fed by stdin.
            do { return await DevSend.run(try DevSend.parse(Array(arguments.dropFirst()))) }
            catch { print("castd: \(error)", to: &err); return ExitCode.usage }
        }
        if arguments.first == "generate-docs" {
            // For packaging (not in --help): man pages and completions from the spec.
            return GenerateDocs.run(Array(arguments.dropFirst()))
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
        case .commandHelp(let topic):
            print(HelpRenderer.command(CastdCommands.spec(topic)), to: &out)
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
        case .config(let o):
            return ConfigCommand.run(o, environment: environment)
        case .status(let o): return StatusCommand.run(o, environment: environment)
        case .stop(let o): return await StopCommand.run(o, environment: environment)
        case .forgetSource(let c): return ForgetSourceCommand.run(c, environment: environment)
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
