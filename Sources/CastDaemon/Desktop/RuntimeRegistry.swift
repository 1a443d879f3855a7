import CastCore
import CastSignaling
import CastSystem
#if canImport(Glibc)
import Glibc
#endif

/// One running `castd --session`, as it describes itself in the runtime registry
/// (`<dir>/<session id>.json`, see `RuntimeRegistry.directory`): what `castd status`
/// lists and `castd stop` signals.
public struct RuntimeEntry: Codable, Equatable, Sendable {
    public var pid: Int32
    public var sessionId: String
    /// UTC, ISO 8601 to the second ("2026-12-06T04:01:02Z").
    public var startedAt: String
    /// `RuntimeState` names: starting, waiting_for_approval, negotiating, casting, reconnecting,
    /// restarting_media, ending.
    public var state: String
    /// What is shared ("screen :0 (XShm)", "monitor HDMI-1 (Mutter)", …).
    public var sharing: String
    /// Desktop audio is being sent to the receiver.
    public var audio: Bool
    public var version: String

    public init(pid: Int32, sessionId: String, startedAt: String, state: String, sharing: String, audio: Bool,
                version: String = CastdVersion.string) {
        self.pid = pid
        self.sessionId = sessionId
        self.startedAt = startedAt
        self.state = state
        self.sharing = sharing
        self.audio = audio
        self.version = version
    }
}

/// The registry's pure decisions: where it lives, which files are entries, and which
/// entries are alive. The file and /proc reads are `RuntimeRegistryStore`'s.
public enum RuntimeRegistry {
    /// `$XDG_RUNTIME_DIR/castd`; without XDG_RUNTIME_DIR (no login session, e.g. a cron job or
    /// `su`), `/tmp/castd-<uid>`, which the store only uses when it is a 0700 directory of this user.
    public static func directory(environment: [String: String], uid: UInt32) -> String {
        if let run = environment["XDG_RUNTIME_DIR"], run.hasPrefix("/") { return run + "/castd" }
        return "/tmp/castd-\(uid)"
    }

    /// The file name of a session's entry.
    public static func fileName(sessionId: String) -> String { sessionId.lowercased() + ".json" }

    /// The session id a registry file name stands for, nil for any other file (temporaries, strays).
    public static func sessionId(fileName: String) -> String? {
        guard fileName.hasSuffix(".json") else { return nil }
        let id = String(fileName.dropLast(5))
        return CommandLineParser.isUUID(id) && id == id.lowercased() ? id : nil
    }

    /// What /proc says of an entry's pid.
    public enum ProcessState: Equatable, Sendable {
        /// No such process, or a zombie (it has exited).
        case gone
        /// A live process: its `comm` and its arguments.
        case running(comm: String, arguments: [String])
    }

    public enum Verdict: Equatable, Sendable {
        case live
        /// Prune it; the reason is for the debug log.
        case stale(String)
    }

    /// An entry is live when its file decodes, names the session its file is named for, and its pid
    /// is a running castd serving that session (`comm` is castd and `--session <id>` is among
    /// its arguments): a reused pid is not mistaken for the cast.
    public static func judge(fileName: String, bytes: [UInt8], process: (Int32) -> ProcessState) -> (RuntimeEntry?, Verdict) {
        guard let entry = try? JSONCoding.decode(RuntimeEntry.self, from: bytes) else { return (nil, .stale("unreadable")) }
        guard sessionId(fileName: fileName) == entry.sessionId.lowercased() else { return (entry, .stale("misnamed")) }
        guard entry.pid > 1 else { return (entry, .stale("bad pid")) }
        let why = staleReason(entry, process(entry.pid))
        return (entry, why.map(Verdict.stale) ?? .live)
    }

    /// Nil when `state` is a running castd serving the entry's session; else why not.
    public static func staleReason(_ entry: RuntimeEntry, _ state: ProcessState) -> String? {
        switch state {
        case .gone: return "process gone"
        case .running(let comm, let args):
            guard comm == "castd" else { return "pid is \(comm), not castd" }
            let id = entry.sessionId.lowercased()
            let serves = zip(args, args.dropFirst()).contains { $0 == "--session" && $1.lowercased() == id }
            return serves ? nil : "pid serves another session"
        }
    }

    /// "2026-12-06T04:01:02Z" for a Unix time.
    public static func iso8601(unixSeconds t: Int) -> String {
        var time = time_t(t)
        var parts = tm()
        gmtime_r(&time, &parts)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
    }
}

/// The registry on disk: the daemon writes, updates and removes its entry; `status` and
/// `stop` list the live ones (pruning the stale). Directory 0700, files 0600.
public struct RuntimeRegistryStore: Sendable {
    public let directory: String

    public init(directory: String) { self.directory = directory }

    public init(environment: [String: String]) {
        self.init(directory: RuntimeRegistry.directory(environment: environment, uid: getuid()))
    }

    /// Writes (or replaces) the entry, atomically.
    public func write(_ entry: RuntimeEntry) throws {
        try checkOwnership()
        try PrivateFile.write(try JSONCoding.encode(entry), to: RuntimeRegistry.fileName(sessionId: entry.sessionId), in: directory)
    }

    /// Removes this session's entry if it is this process's.
    public func remove(sessionId: String, pid: Int32 = getpid()) {
        let file = directory + "/" + RuntimeRegistry.fileName(sessionId: sessionId)
        guard let bytes = try? PrivateFile.read(file),
              let e = try? JSONCoding.decode(RuntimeEntry.self, from: bytes), e.pid == pid else { return }
        unlink(file)
    }

    /// The live entries, sorted by start time; stale files are removed on the way.
    public func live() -> [RuntimeEntry] {
        guard (try? checkOwnership()) != nil, let dir = opendir(directory) else { return [] }
        var names: [String] = []
        while let d = readdir(dir) {
            let name = withUnsafePointer(to: d.pointee.d_name) { $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) } }
            if name.hasSuffix(".json") { names.append(name) }
        }
        closedir(dir)
        var out: [RuntimeEntry] = []
        for name in names {
            let path = directory + "/" + name
            guard let bytes = try? PrivateFile.read(path, limit: 64 * 1024) else { continue }
            let (entry, verdict) = RuntimeRegistry.judge(fileName: name, bytes: bytes, process: ProcFS.state)
            if verdict == .live, let entry { out.append(entry) } else { unlink(path) }
        }
        return out.sorted { ($0.startedAt, $0.sessionId) < ($1.startedAt, $1.sessionId) }
    }

    /// The fallback directory in /tmp is shared with every user: refuse one another user made
    /// (or a symlink), so nobody can plant entries for `castd stop` to signal.
    private func checkOwnership() throws {
        var st = stat()
        guard lstat(directory, &st) == 0 else { return }   // absent: PrivateFile creates it 0700
        guard (st.st_mode & S_IFMT) == S_IFDIR, st.st_uid == getuid() else {
            throw CastError(.io, "\(directory) is not a directory of this user; remove it or set XDG_RUNTIME_DIR.")
        }
    }
}

/// The few /proc reads castd needs about another process.
enum ProcFS {
    /// `comm` and the arguments of `pid`; `.gone` when it does not exist or is a zombie.
    static func state(_ pid: Int32) -> RuntimeRegistry.ProcessState {
        guard let stat = text("/proc/\(pid)/stat"),
              let close = stat.lastIndex(of: ")") else { return .gone }
        // "pid (comm) S …": the state letter follows the last parenthesis (comm may hold one).
        let after = stat[stat.index(after: close)...].trimmingWhitespace()
        if after.hasPrefix("Z") || after.hasPrefix("X") { return .gone }
        let comm = text("/proc/\(pid)/comm")?.trimmingWhitespace() ?? ""
        let raw = (try? PrivateFile.read("/proc/\(pid)/cmdline", limit: 64 * 1024)) ?? nil
        let args = (raw ?? []).split(separator: 0, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        return .running(comm: comm, arguments: args)
    }

    private static func text(_ path: String) -> String? {
        guard let bytes = try? PrivateFile.read(path, limit: 64 * 1024) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }
}
