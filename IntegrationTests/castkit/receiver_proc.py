"""The receiver of a fault scenario, as a process of its own (Scripts/faults starts it with
`ip netns exec <receiver namespace>` so that its media sockets live there).

It signs in, creates a session, approves the sender's join request and answers every offer
with aiortc (castkit/receiver_answerer.py). It reads commands, one JSON object per line on
stdin, and answers each with one JSON line on stdout:

  {"cmd":"create"}                          → {"sessionId", "pin"}
  {"cmd":"approve", "prefs":{…}}            waits for the join request, approves
  {"cmd":"report"}                          → frame arrival times (time.monotonic, shared by
                                              every process of the machine), answered
                                              negotiationIds, rows received, statuses
  {"cmd":"insert", "rows":[{"message_type", "payload", "session_id"?}]}
                                            inserts rows as the receiver, as they are
                                            (hostile rows); → {"inserted", "errors"}
  {"cmd":"bars"}                            → {"bars": mean RGB of the 7 bars of the last frame, "size"}
  {"cmd":"tamper", "fingerprint": true}     later answers carry a wrong DTLS fingerprint
  {"cmd":"api", "name", "body"}             an /api/public call (e.g. session-end)
  {"cmd":"status"}                          → {"status"} of the session row, read through REST
  {"cmd":"quit"}

With `"twcc": true` in its configuration (argv[1]) aiortc sends transport-cc feedback and no
REMB, like Chromium (castkit/twcc_feedback.py): aiortc's Python REMB reads this process's
event-loop delays as queueing and would cap the sender far below what the link carries.
"""
from __future__ import annotations

import asyncio
import json
import re
import sys
import time

from castkit.receiver_answerer import ReceiverAnswerer
from castkit.signaling import ApiError, StackClient, StackConfig


class TamperingAnswerer(ReceiverAnswerer):
    """Answers with the fingerprint's last byte changed when told to."""

    tamper_fingerprint = False

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.row_times: dict[str, float] = {}
        self.signals.on_row(lambda r: self.row_times.setdefault(r["id"], time.monotonic()))
        send = self.signals.send

        async def maybe_tampered(message_type: str, payload: dict) -> None:
            if message_type == "answer" and self.tamper_fingerprint:
                payload = dict(payload, sdp=re.sub(r"(a=fingerprint:sha-256 [0-9A-F:]+)([0-9A-F]{2})",
                                                   lambda m: m.group(1) + ("00" if m.group(2) != "00" else "11"),
                                                   payload["sdp"]))
            # Like a real receiver, rows refused by the session's rate limit (P0429) are retried
            # (a second later, for up to a minute) rather than lost.
            for _ in range(60):
                try:
                    return await send(message_type, payload)
                except ApiError as e:
                    if e.code != "P0429":
                        raise
                    self.rate_limited += 1
                    await asyncio.sleep(1)
            raise RuntimeError(f"{message_type} refused by the rate limit for a minute")
        self.signals.send = maybe_tampered
        self.rate_limited = 0


async def main() -> None:
    cfg = json.loads(sys.argv[1])
    if cfg.get("twcc"):
        from castkit import twcc_feedback
        twcc_feedback.install()
    client = StackClient(StackConfig(cfg["api_url"], cfg["supabase_url"], cfg["key"]))
    await client.sign_in()
    session: dict = {}
    answerer: TamperingAnswerer | None = None
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 24)   # hostile rows come as one long line
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    def out(obj: dict) -> None:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    while True:
        line = await reader.readline()
        if not line:
            break
        msg = json.loads(line)
        cmd = msg.get("cmd")
        try:
            if cmd == "create":
                session = await client.api("session-create", {})
                answerer = TamperingAnswerer(client, session["sessionId"], keep_frames=1,
                                             ice_servers=cfg.get("ice_servers"))
                await answerer.start()
                out({"sessionId": session["sessionId"], "pin": session["pin"]})
            elif cmd == "approve":
                sid = session["sessionId"]
                await answerer.signals.wait_row(lambda r: r["message_type"] == "join_request", timeout=30)
                body = {"sessionId": sid, "approve": True}
                if msg.get("prefs"):
                    body["streamPrefs"] = msg["prefs"]
                await client.api("session-approve", body)
                out({"ok": True})
            elif cmd == "report":
                a = answerer
                out({"frames": [f.arrived for f in a.frames] if a else [],
                     "frame_sizes": sorted({(f.width, f.height) for f in a.frames}) if a else [],
                     "answered": sorted(a.answered) if a else [],
                     "negotiation_id": a.negotiation_id if a else None,
                     "connection_states": a.connection_states if a else [],
                     "disconnect_reason": a.disconnect_reason if a else None,
                     "rows": [{"type": r["message_type"], "t": a.row_times.get(r["id"]), "negotiationId": (r.get("payload") or {}).get("negotiationId")
                               if isinstance(r.get("payload"), dict) else None,
                               "payload": r.get("payload") if r["message_type"] == "disconnect" else None}
                              for r in (a.signals.rows if a else [])],
                     "statuses": a.signals.statuses if a else [],
                     "rate_limited": a.rate_limited if a else 0})
            elif cmd == "insert":
                inserted, errors = 0, []
                for r in msg["rows"]:
                    row = {"session_id": r.get("session_id", session["sessionId"]), "sender_role": "receiver",
                           "recipient_role": "sender", "message_type": r["message_type"], "payload": r["payload"]}
                    try:
                        await client.insert(row)
                        inserted += 1
                    except ApiError as e:
                        errors.append(f"{e.status} {e.code}")
                out({"inserted": inserted, "errors": errors[:20], "error_count": len(errors)})
            elif cmd == "status":       # the session row as REST reads it (not through Realtime)
                async with client.http.get(f"{client.config.supabase_url}/rest/v1/casting_sessions?id=eq.{session['sessionId']}"
                                           "&select=status", headers=client._headers(await client.token())) as r:
                    rows = await r.json(content_type=None)
                out({"status": rows[0]["status"] if rows else None})
            elif cmd == "bars":         # mean RGB of the seven bars of the last decoded frame
                from castkit.xscreen import bar_colours
                f = answerer.last_frame if answerer else None
                out({"bars": bar_colours(f) if f is not None else None,
                     "size": [int(f.shape[1]), int(f.shape[0])] if f is not None else None})
            elif cmd == "tamper":
                answerer.tamper_fingerprint = bool(msg.get("fingerprint"))
                out({"ok": True})
            elif cmd == "api":
                out({"ok": True, "result": await client.api(msg["name"], msg.get("body"))})
            elif cmd == "quit":
                break
            else:
                out({"error": f"unknown cmd {cmd}"})
        except (ApiError, asyncio.TimeoutError, KeyError) as e:
            out({"error": f"{type(e).__name__}: {e}"})
    if answerer:
        await answerer.close()
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
