// The receiver's view of one session: subscribe first, then backfill, so no
// row can fall between the two (spec §5); rows from both streams are merged
// and de-duplicated by row id (spec §6).

export class SessionFeed {
  /**
   * onRow(row, {backfill}) for each signaling row addressed to the receiver, once;
   * onSession(record, oldRecord) for each casting_sessions UPDATE;
   * onStatus(text) for the channel status ("SUBSCRIBED", "CLOSED", …).
   */
  constructor({ realtime, rest, sessionId, onRow, onSession, onStatus }) {
    this.realtime = realtime;
    this.rest = rest;
    this.sessionId = sessionId;
    this.onRow = onRow;
    this.onSession = onSession || (() => {});
    this.onStatus = onStatus || (() => {});
    this.seen = new Set();
    this.channel = null;
  }

  start() {
    const id = this.sessionId;
    this.channel = this.realtime.channel(`receiver-${id}`, [
      { event: "UPDATE", schema: "public", table: "casting_sessions", filter: `id=eq.${id}` },
      { event: "INSERT", schema: "public", table: "signaling_messages", filter: `session_id=eq.${id}` },
    ], {
      onChange: (data) => this.change(data),
      onStatus: (status, detail) => {
        this.onStatus(status, detail);
        if (status === "SUBSCRIBED") this.backfill();
      },
    });
    this.channel.subscribe();
  }

  stop() { this.channel?.leave(); }

  change(data) {
    if (data.table === "casting_sessions" && data.type === "UPDATE") {
      if (data.record?.id === this.sessionId) this.onSession(data.record, data.old_record || null);
    } else if (data.table === "signaling_messages" && data.type === "INSERT") {
      const row = data.record;
      if (row && row.session_id === this.sessionId && row.recipient_role === "receiver") this.deliver(row, false);
    }
  }

  deliver(row, backfill) {
    if (!row.id || this.seen.has(row.id)) return;
    this.seen.add(row.id);
    try { this.onRow(row, { backfill }); } catch (e) { console.error("row handler", e); }
  }

  async backfill() {
    try {
      const rows = await this.rest.selectSignals(this.sessionId, "receiver");
      // Deliver the whole backfill as one batch so the owner can pick the
      // newest offer before acting on any.
      const fresh = rows.filter((r) => r.id && !this.seen.has(r.id));
      for (const r of fresh) this.seen.add(r.id);
      if (fresh.length) this.onBatch ? this.onBatch(fresh) : fresh.forEach((r) => {
        try { this.onRow(r, { backfill: true }); } catch (e) { console.error("row handler", e); }
      });
    } catch (e) {
      console.error("backfill failed", e.code || e.message);
      this.onStatus("BACKFILL_ERROR", e.message);
    }
  }
}
