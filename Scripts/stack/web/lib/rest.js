// PostgREST access to signaling_messages and the /api/public/* endpoints.
//
// Inserts ask for `Prefer: return=minimal`: each side may read only rows
// addressed to itself, so RETURNING would fail the SELECT policy with 42501
// (docs/contract.md, "Endpoints and the backend's rules").

export class ApiError extends Error {
  constructor(code, message, status, retryAfter) {
    super(message);
    this.code = code;
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

async function parse(res) {
  const text = await res.text();
  try { return text ? JSON.parse(text) : null; } catch { return null; }
}

export class Rest {
  constructor(config, auth) {
    this.supabaseUrl = config.supabaseUrl.replace(/\/$/, "");
    this.apiUrl = (config.apiUrl || config.supabaseUrl).replace(/\/$/, "");
    this.key = config.supabaseKey;
    this.auth = auth;
  }

  async headers(extra = {}) {
    return {
      "apikey": this.key,
      "Authorization": `Bearer ${await this.auth.accessToken()}`,
      "Content-Type": "application/json",
      ...extra,
    };
  }

  /** Inserts one signaling row; throws ApiError with the SQLSTATE in `code`. */
  async insertSignal(row) {
    const res = await fetch(`${this.supabaseUrl}/rest/v1/signaling_messages`, {
      method: "POST",
      headers: await this.headers({ "Prefer": "return=minimal" }),
      body: JSON.stringify(row),
    });
    if (!res.ok) {
      // PostgREST: {"code": SQLSTATE, "message", …}; read the code, not the status.
      const body = await parse(res);
      throw new ApiError(body?.code || `http_${res.status}`, body?.message || "insert failed", res.status);
    }
  }

  /** Rows addressed to `recipientRole` in a session, oldest first. */
  async selectSignals(sessionId, recipientRole) {
    const q = new URLSearchParams({
      select: "*",
      session_id: `eq.${sessionId}`,
      recipient_role: `eq.${recipientRole}`,
      order: "created_at.asc",
    });
    const res = await fetch(`${this.supabaseUrl}/rest/v1/signaling_messages?${q}`, {
      headers: await this.headers(),
    });
    const body = await parse(res);
    if (!res.ok) throw new ApiError(body?.code || `http_${res.status}`, body?.message || "select failed", res.status);
    return body || [];
  }

  /**
   * The session row as RLS lets this user read it: {row} (row null when the
   * session is not ours or does not exist), or null when casting_sessions is
   * not readable over REST at all.
   */
  async selectSession(sessionId) {
    try {
      const q = new URLSearchParams({ select: "*", id: `eq.${sessionId}` });
      const res = await fetch(`${this.supabaseUrl}/rest/v1/casting_sessions?${q}`, {
        headers: await this.headers(),
      });
      if (!res.ok) return null;
      const rows = await parse(res);
      return Array.isArray(rows) ? { row: rows[0] ?? null } : null;
    } catch { return null; }
  }

  /** POST (or GET when body is undefined) /api/public/<name>. */
  async api(name, body) {
    const init = { method: body === undefined ? "GET" : "POST", headers: await this.headers() };
    if (body !== undefined) init.body = JSON.stringify(body);
    const res = await fetch(`${this.apiUrl}/api/public/${name}`, init);
    const json = await parse(res);
    if (!res.ok) {
      const err = json?.error || {};
      const retry = res.headers.get("Retry-After");
      throw new ApiError(err.code || `http_${res.status}`, err.message || `${name} failed (${res.status})`,
        res.status, retry ? Number(retry) : undefined);
    }
    return json;
  }
}
