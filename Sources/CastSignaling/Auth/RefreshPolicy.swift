import CastCore

/// When to refresh the access token, as the official clients do
/// (docs/contract.md, wire A; supabase-js `AUTO_REFRESH_TICK_DURATION_MS` and
/// `AUTO_REFRESH_TICK_THRESHOLD`): check every 30 s, refresh when fewer
/// than 90 s remain, and before any call when fewer than 30 s remain.
/// Times are Unix seconds (the JWT's `exp` is wall-clock time), passed in;
/// `exp` is the server's value, so the difference saturates (issue 17).
public enum RefreshPolicy {
    public static let tickInterval: Duration = .seconds(30)
    public static let tickMargin: Int64 = 90
    public static let callMargin: Int64 = 30

    /// On a 30-second tick: is it time to refresh?
    public static func refreshOnTick(expiresAt: Int64, nowUnix: Int64) -> Bool {
        expiresAt.saturatingSubtract(nowUnix) < tickMargin
    }

    /// Before a request that carries the token: must it be refreshed first?
    public static func refreshBeforeCall(expiresAt: Int64, nowUnix: Int64) -> Bool {
        expiresAt.saturatingSubtract(nowUnix) < callMargin
    }

    /// A token read from the shared store (rotated by another process) is
    /// good to use instead of refreshing when it would not itself be refreshed on a tick.
    public static func isFresh(expiresAt: Int64, nowUnix: Int64) -> Bool {
        !refreshOnTick(expiresAt: expiresAt, nowUnix: nowUnix)
    }
}

/// Retries of Auth requests on 5xx and network errors (supabase-js
/// `_refreshAccessToken`): wait 200 ms·2^(n−1) before attempt n+1, and stop
/// when the wait would end 30 s or more after the first attempt began.
public enum RetryPolicy {
    public static let base: Duration = .milliseconds(200)
    public static let budget: Duration = .seconds(30)

    /// The wait after failed attempt `attempt` (1-based), `elapsed` after
    /// the first began; nil means give up.
    public static func delay(afterAttempt attempt: Int, elapsed: Duration) -> Duration? {
        guard attempt >= 1, attempt < 40 else { return nil }
        let d = base * (1 << (attempt - 1))
        return elapsed + d < budget ? d : nil
    }
}
