// A small Supabase Realtime client: Phoenix channels, vsn 1.0.0, postgres_changes
// only (docs/contract.md, wire C).
//
// Socket: heartbeat every 25 s; a heartbeat still unanswered when the next is
// due closes the socket; reconnect after 1, 2, 5, then 10 s. Channel: rejoin
// after an error or close with 1, 2, 5, then 10 s; push `access_token` to every
// joined channel after each token refresh. A channel reports "SUBSCRIBED" on
// the `system` ok push (or, if that never comes, shortly after an ok join reply
// that carries postgres_changes); callers backfill on every SUBSCRIBED, so rows
// missed while disconnected are fetched again and de-duplicated by id.

const HEARTBEAT_MS = 25000;
const PUSH_TIMEOUT_MS = 10000;
const SOCKET_BACKOFF_MS = [1000, 2000, 5000, 10000];
const REJOIN_BACKOFF_MS = [1000, 2000, 5000, 10000];

export class Realtime {
  constructor(config, auth) {
    const base = config.supabaseUrl.replace(/\/$/, "").replace(/^http/, "ws");
    const q = new URLSearchParams({ apikey: config.supabaseKey, vsn: "1.0.0" });
    this.url = `${base}/realtime/v1/websocket?${q}`;
    this.auth = auth;
    this.ref = 0;
    this.ws = null;
    this.channels = new Map();
    this.heartbeatRef = null;
    this.heartbeatTimer = null;
    this.reconnectTries = 0;
    this.reconnectTimer = null;
    this.closedByUser = false;
    auth.onRefresh((token) => {
      for (const ch of this.channels.values()) {
        if (ch.state === "joined") this.push({ topic: ch.topic, event: "access_token", payload: { access_token: token } });
      }
    });
  }

  nextRef() { return String(++this.ref); }

  get connected() { return this.ws?.readyState === WebSocket.OPEN; }

  connect() {
    this.closedByUser = false;
    if (this.ws && this.ws.readyState <= WebSocket.OPEN) return;
    const ws = new WebSocket(this.url);
    this.ws = ws;
    ws.onopen = () => {
      this.reconnectTries = 0;
      this.heartbeatRef = null;
      clearInterval(this.heartbeatTimer);
      this.heartbeatTimer = setInterval(() => this.heartbeat(), HEARTBEAT_MS);
      for (const ch of this.channels.values()) if (ch.wanted) ch.join();
    };
    ws.onmessage = (ev) => {
      let msg;
      try { msg = JSON.parse(ev.data); } catch { return; }
      this.dispatch(msg);
    };
    ws.onclose = () => {
      if (this.ws !== ws) return;
      clearInterval(this.heartbeatTimer);
      for (const ch of this.channels.values()) ch.socketClosed();
      if (this.closedByUser) return;
      const delay = SOCKET_BACKOFF_MS[Math.min(this.reconnectTries, SOCKET_BACKOFF_MS.length - 1)];
      this.reconnectTries += 1;
      clearTimeout(this.reconnectTimer);
      this.reconnectTimer = setTimeout(() => this.connect(), delay);
    };
    ws.onerror = () => { /* onclose follows and reconnects */ };
  }

  disconnect() {
    this.closedByUser = true;
    clearTimeout(this.reconnectTimer);
    clearInterval(this.heartbeatTimer);
    this.ws?.close();
  }

  heartbeat() {
    if (!this.connected) return;
    if (this.heartbeatRef !== null) {
      // The previous heartbeat was never answered: the link is dead.
      this.heartbeatRef = null;
      this.ws.close();
      return;
    }
    this.heartbeatRef = this.nextRef();
    this.push({ topic: "phoenix", event: "heartbeat", payload: {}, ref: this.heartbeatRef });
  }

  push(msg) {
    if (!this.connected) return false;
    this.ws.send(JSON.stringify({ ref: null, join_ref: null, ...msg }));
    return true;
  }

  dispatch(msg) {
    if (msg.topic === "phoenix") {
      if (msg.event === "phx_reply" && msg.ref === this.heartbeatRef) this.heartbeatRef = null;
      return;
    }
    this.channels.get(msg.topic)?.receive(msg);
  }

  /**
   * A channel with postgres_changes subscriptions, e.g.
   * [{event: "INSERT", schema: "public", table: "signaling_messages", filter: "session_id=eq.<id>"}].
   * handlers: onChange(data) with data = {type, table, record, old_record, commit_timestamp};
   *           onStatus(status, detail) with "SUBSCRIBED" | "CHANNEL_ERROR" | "CLOSED" | "TIMED_OUT".
   */
  channel(name, changes, handlers) {
    const ch = new Channel(this, `realtime:${name}`, changes, handlers);
    this.channels.set(ch.topic, ch);
    return ch;
  }
}

class Channel {
  constructor(socket, topic, changes, handlers) {
    this.socket = socket;
    this.topic = topic;
    this.changes = changes;
    this.handlers = handlers;
    this.state = "closed";
    this.wanted = false;
    this.joinRef = null;
    this.subscribed = false;
    this.rejoinTries = 0;
    this.timers = [];
  }

  subscribe() {
    this.wanted = true;
    if (this.socket.connected) this.join();
    else this.socket.connect();
    return this;
  }

  clearTimers() { for (const t of this.timers) clearTimeout(t); this.timers = []; }

  async join() {
    if (!this.wanted || !this.socket.connected || this.state === "joining" || this.state === "joined") return;
    this.clearTimers();
    this.state = "joining";
    this.subscribed = false;
    let token;
    try { token = await this.socket.auth.accessToken(); } catch (e) {
      this.state = "errored";
      this.status("CHANNEL_ERROR", e.message);
      return this.scheduleRejoin();
    }
    this.joinRef = this.socket.nextRef();
    const ok = this.socket.push({
      topic: this.topic, event: "phx_join", ref: this.joinRef, join_ref: this.joinRef,
      payload: {
        config: {
          broadcast: { ack: false, self: false },
          presence: { key: "", enabled: false },
          postgres_changes: this.changes,
          private: false,
        },
        access_token: token,
      },
    });
    if (!ok) { this.state = "closed"; return; }
    this.timers.push(setTimeout(() => {
      if (this.state !== "joining") return;
      this.state = "errored";
      this.status("TIMED_OUT");
      this.scheduleRejoin();
    }, PUSH_TIMEOUT_MS));
  }

  leave() {
    this.wanted = false;
    this.clearTimers();
    if (this.state === "joined" || this.state === "joining") {
      this.socket.push({ topic: this.topic, event: "phx_leave", payload: {}, ref: this.socket.nextRef(), join_ref: this.joinRef });
    }
    this.state = "closed";
    this.socket.channels.delete(this.topic);
  }

  socketClosed() {
    this.clearTimers();
    if (this.state !== "closed") {
      this.state = "closed";
      this.status("CLOSED");
    }
    // The socket rejoins every wanted channel when it reopens.
  }

  scheduleRejoin() {
    if (!this.wanted) return;
    const delay = REJOIN_BACKOFF_MS[Math.min(this.rejoinTries, REJOIN_BACKOFF_MS.length - 1)];
    this.rejoinTries += 1;
    this.timers.push(setTimeout(() => { if (this.state !== "joined") { this.state = "closed"; this.join(); } }, delay));
  }

  markSubscribed() {
    if (this.subscribed) return;
    this.subscribed = true;
    this.rejoinTries = 0;
    this.status("SUBSCRIBED");
  }

  status(s, detail) {
    try { this.handlers.onStatus?.(s, detail); } catch (e) { console.error("channel status handler", e); }
  }

  receive(msg) {
    const p = msg.payload || {};
    switch (msg.event) {
      case "phx_reply":
        if (msg.ref !== this.joinRef || this.state !== "joining") return;
        if (p.status === "ok") {
          this.state = "joined";
          // supabase-swift also counts a join reply carrying postgres_changes as
          // subscribed; wait briefly for the system push before doing the same.
          if (p.response && "postgres_changes" in p.response) {
            this.timers.push(setTimeout(() => this.markSubscribed(), 1500));
          }
        } else {
          this.state = "errored";
          this.status("CHANNEL_ERROR", p.response?.reason);
          this.scheduleRejoin();
        }
        return;
      case "system":
        if (p.status === "ok" && p.extension === "postgres_changes") this.markSubscribed();
        else if (p.status === "error") this.status("CHANNEL_ERROR", p.message);
        return;
      case "postgres_changes":
        if (p.data) {
          try { this.handlers.onChange?.(p.data); } catch (e) { console.error("change handler", e); }
        }
        return;
      case "phx_error":
      case "phx_close":
        // Token expiry ends in phx_close; rejoin with a fresh token.
        if (msg.ref && this.joinRef && msg.ref !== this.joinRef) return;
        this.clearTimers();
        this.state = "closed";
        this.status(msg.event === "phx_error" ? "CHANNEL_ERROR" : "CLOSED");
        this.scheduleRejoin();
        return;
      default:
        return;
    }
  }
}
