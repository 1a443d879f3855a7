import CastCore
import CastSignaling
import CastSystem
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The sender identity on disk (docs/contract.md, "Sender
/// identity"): `$XDG_STATE_HOME/castd/credentials.json` (else
/// `~/.local/state/castd/`), directory 0700, file 0600. Refresh tokens
/// rotate and a reused one revokes the whole family (docs/contract.md, wire A),
/// so every refresh runs under an exclusive `flock` on `credentials.lock`
/// (a separate file: the data file is replaced by rename, which a lock on
/// it would not survive), re-reads the file under the lock, and writes the
/// new pair atomically before anyone uses it.
public struct CredentialStore: Sendable {
    public let directory: String
    public var file: String { directory + "/credentials.json" }
    public var lockFile: String { directory + "/credentials.lock" }

    public init(directory: String) { self.directory = directory }

    /// XDG Base Directory: `XDG_STATE_HOME` if set and absolute, else `$HOME/.local/state`.
    public static func defaultDirectory(environment env: [String: String]) throws -> String {
        if let x = env["XDG_STATE_HOME"], x.hasPrefix("/") { return x + "/castd" }
        guard let home = env["HOME"], home.hasPrefix("/") else {
            throw CastError(.noCredentials, "Neither XDG_STATE_HOME nor HOME is set: castd has nowhere to keep its identity.")
        }
        return home + "/.local/state/castd"
    }

    /// What is stored. `backend` ties the identity to one Supabase project.
    public struct Record: Sendable, Equatable, Codable {
        public var version: Int = 1
        public var backend: String
        public var userID: String
        public var accessToken: String
        public var refreshToken: String
        public var expiresAt: Int64

        enum CodingKeys: String, CodingKey {
            case version, backend
            case userID = "user_id", accessToken = "access_token", refreshToken = "refresh_token", expiresAt = "expires_at"
        }

        public init(backend: String, tokens: AuthTokens) {
            self.backend = backend; userID = tokens.userID
            accessToken = tokens.accessToken.unredacted; refreshToken = tokens.refreshToken.unredacted
            expiresAt = tokens.expiresAt
        }

        public var tokens: AuthTokens {
            AuthTokens(accessToken: Redacted(accessToken), refreshToken: Redacted(refreshToken), userID: userID, expiresAt: expiresAt)
        }
    }

    // MARK: files

    /// Creates the directory (0700) if needed, and tightens it if it exists.
    public func ensureDirectory() throws { try PrivateFile.ensureDirectory(directory) }

    /// The stored identity for `backend`, or nil when there is none (or it belongs to another backend).
    public func load(backend: String) throws -> Record? {
        let data: [UInt8]
        do {
            guard let d = try PrivateFile.read(file) else { return nil }
            data = d
        } catch let e as CastError where e.code == .tooLarge {
            throw CastError(.tooLarge, "\(file) is implausibly large; delete it and pair again.")
        }
        guard let r = try? JSONCoding.decode(Record.self, from: data) else {
            throw CastError(.io, "\(file) is damaged; delete it and pair again.")
        }
        return r.backend == backend ? r : nil
    }

    /// Writes atomically: a temporary file (0600) in the same directory,
    /// fsync, rename over the old one, fsync the directory.
    public func save(_ record: Record) throws {
        try PrivateFile.write(try JSONCoding.encode(record), to: "credentials.json", in: directory)
    }

    public func delete() throws {
        if unlink(file) != 0 && Glibc.errno != ENOENT { throw Self.errno("delete \(file)") }
    }

    // MARK: the lock

    /// Runs `body` holding the exclusive lock. Waits for another holder by
    /// polling (so no thread of the cooperative pool blocks in `flock`), up to `timeout`.
    public func withLock<T>(isolation: isolated (any Actor)? = #isolation, timeout: Duration = .seconds(60),
                            _ body: () async throws -> T) async throws -> T {
        try ensureDirectory()
        let fd = open(lockFile, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Self.errno("open \(lockFile)") }
        defer { close(fd) }   // closing releases the lock
        let clock = SystemMonotonicClock()
        let start = clock.now()
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            guard Glibc.errno == EWOULDBLOCK || Glibc.errno == EINTR else { throw Self.errno("lock \(lockFile)") }
            guard clock.now() - start < timeout else {
                throw CastError(.timeout, "Another castd process held \(lockFile) for over \(timeout); is one stuck?")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        defer { flock(fd, LOCK_UN) }
        return try await body()
    }

    static func errno(_ what: String) -> CastError { PrivateFile.error(what, errno: Glibc.errno) }
}
