// Anonymous Supabase Auth for the receiver pages (docs/contract.md, wire A).
//
// One anonymous identity per browser profile, kept in localStorage so that
// /dashboard and /viewer/:id (and a page refresh) share it. Access tokens are
// refreshed ahead of expiry; refresh tokens rotate, so a refresh runs under a
// Web Lock and first re-reads storage: if another tab already rotated, adopt
// its pair instead of reusing a spent token (which would revoke the family).

const API_VERSION = "2024-01-01";
// Official clients: refresh when fewer than ~90 s remain (docs/contract.md, wire A).
const REFRESH_MARGIN_S = 90;
// Refresh codes that mean the stored session is dead: sign in again.
const DEAD_SESSION_CODES = new Set([
  "refresh_token_not_found", "refresh_token_already_used",
  "session_expired", "session_not_found",
]);

export class AuthError extends Error {
  constructor(code, message, status) {
    super(message);
    this.code = code;
    this.status = status;
  }
}

export class Auth {
  constructor(config) {
    this.url = config.supabaseUrl.replace(/\/$/, "");
    this.key = config.supabaseKey;
    this.storageKey = `castd.auth.${this.url}`;
    this.session = null;
    this.timer = null;
    this.listeners = [];
  }

  headers(bearer) {
    return {
      "apikey": this.key,
      "Content-Type": "application/json",
      "X-Supabase-Api-Version": API_VERSION,
      "Authorization": `Bearer ${bearer || this.key}`,
    };
  }

  get userId() { return this.session?.user?.id ?? null; }

  /** Called with the new access token after every refresh (Realtime pushes it). */
  onRefresh(fn) { this.listeners.push(fn); }

  /** Loads the stored session or signs in anonymously; schedules refreshes. */
  async start() {
    const stored = this.load();
    if (stored) {
      this.session = stored;
      if (this.secondsLeft() < Math.min(REFRESH_MARGIN_S, (stored.expires_in ?? 3600) / 3)) await this.refresh();
    } else {
      await this.signUp();
    }
    this.schedule();
    return this.session;
  }

  /**
   * A valid access token; refreshes first when fewer than 30 s remain (a
   * quarter of the lifetime when tests compress it below two minutes).
   */
  async accessToken() {
    if (!this.session) await this.start();
    const lifetime = this.session.expires_in ?? 3600;
    if (this.secondsLeft() < Math.min(30, lifetime / 4)) await this.refresh();
    return this.session.access_token;
  }

  secondsLeft() {
    return (this.session?.expires_at ?? 0) - Date.now() / 1000;
  }

  load() {
    try {
      const s = JSON.parse(localStorage.getItem(this.storageKey) || "null");
      return s && s.access_token && s.refresh_token && s.user ? s : null;
    } catch { return null; }
  }

  save(s) {
    // expires_at may be missing on some servers; derive it from expires_in.
    if (!s.expires_at && s.expires_in) s.expires_at = Math.floor(Date.now() / 1000) + s.expires_in;
    this.session = s;
    localStorage.setItem(this.storageKey, JSON.stringify(s));
  }

  async signUp() {
    const body = { data: {}, gotrue_meta_security: { captcha_token: null } };
    const s = await this.post("/auth/v1/signup", body);
    this.save(s);
  }

  async refresh() {
    const run = async () => {
      // Another tab may have rotated already: adopt its newer pair.
      const stored = this.load();
      if (stored && this.session && stored.refresh_token !== this.session.refresh_token
          && (stored.expires_at ?? 0) >= (this.session.expires_at ?? 0)) {
        this.session = stored;
        if (this.secondsLeft() >= REFRESH_MARGIN_S) return;
      }
      const rt = this.session?.refresh_token;
      if (!rt) return this.signUp();
      let delayMs = 200;
      for (;;) {
        try {
          const s = await this.post("/auth/v1/token?grant_type=refresh_token", { refresh_token: rt });
          this.save(s);
          return;
        } catch (e) {
          if (e instanceof AuthError && DEAD_SESSION_CODES.has(e.code)) {
            // The identity is gone; a new one cannot see the old sessions, but
            // the page can still show a clear error rather than loop.
            localStorage.removeItem(this.storageKey);
            throw e;
          }
          // 5xx and network errors: retry 200 ms·2^(n−1), stop before 30 s.
          if ((e.status && e.status < 500) || delayMs > 15000) throw e;
          await new Promise((r) => setTimeout(r, delayMs));
          delayMs *= 2;
        }
      }
    };
    if (navigator.locks) await navigator.locks.request(`castd-auth:${this.url}`, run);
    else await run();
    this.schedule();
    for (const fn of this.listeners) {
      try { fn(this.session.access_token); } catch (e) { console.error("auth listener", e); }
    }
  }

  schedule() {
    clearTimeout(this.timer);
    const lifetime = this.session?.expires_in ?? 3600;
    // Short lifetimes (tests compress time) refresh at two thirds of the lifetime.
    const margin = Math.min(REFRESH_MARGIN_S, lifetime / 3);
    const inMs = Math.max(0, (this.secondsLeft() - margin) * 1000);
    this.timer = setTimeout(() => {
      this.refresh().catch((e) => console.error("auth refresh failed", e.code || e.message));
    }, inMs);
  }

  async post(path, body) {
    let res;
    try {
      res = await fetch(this.url + path, {
        method: "POST", headers: this.headers(), body: JSON.stringify(body),
      });
    } catch (e) {
      throw new AuthError("network", `Auth request failed: ${e.message}`, 0);
    }
    const text = await res.text();
    let json = null;
    try { json = JSON.parse(text); } catch { /* non-JSON error body */ }
    if (!res.ok) {
      const code = (typeof json?.code === "string" && json.code) || json?.error_code || json?.error || `http_${res.status}`;
      throw new AuthError(String(code), json?.message || json?.msg || `Auth failed (${res.status})`, res.status);
    }
    return json;
  }
}
