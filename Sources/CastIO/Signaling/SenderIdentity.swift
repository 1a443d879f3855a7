import CastCore
import CastSignaling
import FoundationEssentials

/// castd's one anonymous identity per user account (docs/contract.md,
/// "Sender identity"), shared by every castd process through the
/// `CredentialStore`. An actor: it is the single owner of the current tokens
/// in this process; the file lock orders it against other processes.
public actor SenderIdentity {
    public let store: CredentialStore
    public let auth: AuthClient
    /// The Supabase URL the identity belongs to.
    public let backend: String
    private let nowUnix: @Sendable () -> Int64
    private var current: AuthTokens?

    public init(store: CredentialStore, auth: AuthClient, backend: String,
                nowUnix: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }) {
        self.store = store; self.auth = auth; self.backend = backend; self.nowUnix = nowUnix
    }

    public var userID: String? { current?.userID }

    /// Loads the stored identity, or (with `createIfMissing`) signs up
    /// anonymously and stores the new one. Under the lock, so two first runs
    /// at once create one identity, not two.
    @discardableResult
    public func signIn(createIfMissing: Bool) async throws -> AuthTokens {
        if let c = current { return c }
        let t: AuthTokens = try await store.withLock {
            if let r = try store.load(backend: backend) { return r.tokens }
            guard createIfMissing else {
                throw CastError(.noCredentials, "castd has no identity yet; pair first with `castd pair`.")
            }
            let fresh = try await auth.signUpAnonymously()
            try store.save(CredentialStore.Record(backend: backend, tokens: fresh))
            return fresh
        }
        current = t
        return t
    }

    /// Forgets a dead identity so the next `signIn(createIfMissing: true)` makes a new one.
    public func forget() throws {
        current = nil
        try store.delete()
    }

    /// The token for a request: refreshed first if fewer than 30 s remain (docs/contract.md, wire A).
    public func accessToken() async throws -> Redacted<String> {
        let t = try await signIn(createIfMissing: false)
        if RefreshPolicy.refreshBeforeCall(expiresAt: t.expiresAt, nowUnix: nowUnix()) {
            return try await refresh(force: false).accessToken
        }
        return t.accessToken
    }

    /// The 30-second tick: refresh when fewer than 90 s remain. Returns the
    /// new tokens if they changed (so the owner pushes `access_token` to Realtime).
    public func tick() async throws -> AuthTokens? {
        let before = try await signIn(createIfMissing: false)
        guard RefreshPolicy.refreshOnTick(expiresAt: before.expiresAt, nowUnix: nowUnix()) else { return nil }
        let after = try await refresh(force: false)
        // A refresh within the same second may mint an identical JWT; the refresh token still rotated.
        return after.accessToken == before.accessToken && after.refreshToken == before.refreshToken ? nil : after
    }

    /// Refreshes under the file lock. The file is re-read first: if another
    /// process rotated the pair and its token is fresh, that pair is used
    /// and no refresh is made (a second refresh of the old token would be a
    /// reuse and could revoke the family). With `force` (after a 401) the
    /// stored pair is refreshed unless it is newer than the one that failed.
    @discardableResult
    public func refresh(force: Bool) async throws -> AuthTokens {
        let held = try await signIn(createIfMissing: false)
        let now = nowUnix()
        let t: AuthTokens = try await store.withLock {
            guard let disk = try store.load(backend: backend)?.tokens else {
                throw CastError(.noCredentials, "castd's stored identity is gone; pair again with `castd pair`.")
            }
            // Another process rotated the pair while this one waited for the
            // lock: its token is usable unless it is itself about to expire.
            let rotatedElsewhere = disk.refreshToken != held.refreshToken
            if rotatedElsewhere && !RefreshPolicy.refreshBeforeCall(expiresAt: disk.expiresAt, nowUnix: now) { return disk }
            if !force && RefreshPolicy.isFresh(expiresAt: disk.expiresAt, nowUnix: now) { return disk }
            let new = try await auth.refresh(disk.refreshToken)
            // Written back before anyone uses it: the old refresh token is now spent.
            try store.save(CredentialStore.Record(backend: backend, tokens: new))
            return new
        }
        current = t
        return t
    }

    /// Runs a request with the current token; if the server answers 401
    /// (token revoked or clock skew), refreshes once and retries once.
    public func withToken<T: Sendable>(_ call: @Sendable (Redacted<String>) async throws -> T) async throws -> T {
        let token = try await accessToken()
        do {
            return try await call(token)
        } catch let e as ServerError where e.code == .unauthorized {
            return try await call(try await refresh(force: true).accessToken)
        }
    }
}
