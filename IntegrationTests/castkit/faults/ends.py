"""Rows of the ends family: how a cast ends: SIGTERM under load, the receiver's Stop, SIGKILL then
a restart, and authorization expiry at the cap (spec §9, §10, §11; issue 8 §4)."""
from __future__ import annotations

import asyncio
import re
import signal
import time

from castkit.faults.world import AUTH_CAP_S, CAP_STACK, Result, World, casting, check


async def sigterm_under_load(w: World) -> Result:
    r = Result("SIGTERM under load", "disconnect row and session end within 2 s, exit 0 (issue 8 §4)")
    async with casting(w, r.name) as c:
        w.impair(delay_ms=20, jitter_ms=10, loss=0.05)
        await asyncio.sleep(5)
        t0 = time.monotonic()
        c.daemon.signal(signal.SIGTERM)
        rc, _ = await c.daemon.wait(timeout=10)
        took = time.monotonic() - t0
        # The receiver saw the row and the status change (session-update end → disconnected) through Realtime.
        deadline = time.monotonic() + 5
        while True:
            rep = await c.report()
            disc = [x for x in rep["rows"] if x["type"] == "disconnect"]
            if (disc and "disconnected" in rep["statuses"]) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        row_s = round(disc[0]["t"] - t0, 2) if disc and disc[0]["t"] else None
        ok = (rc == 0 and took <= 2.0 and [x["payload"] for x in disc] == [{"reason": "sender_ended"}]
              and row_s is not None and row_s <= 2.0 and "disconnected" in rep["statuses"])
        return check(r, ok, f"exit {rc} {took:.2f} s after SIGTERM; the receiver had the disconnect row after {row_s} s; "
                            f"statuses {rep['statuses']}", exit=rc, exit_s=round(took, 2), disconnect_row_s=row_s)


async def receiver_stop(w: World) -> Result:
    r = Result("receiver Stop", "session-end by the receiver: castd stops capture and media and exits 0 within 2 s, "
                                "saying the receiver ended the session (spec §9)")
    async with casting(w, r.name) as c:
        t0 = time.monotonic()
        res = await c.rx.cmd(cmd="api", name="session-end", body={"sessionId": c.session_id})
        try:
            rc, _ = await c.daemon.wait(timeout=15)
        except asyncio.TimeoutError:
            rc = None
        took = round(time.monotonic() - t0, 2)
        said = any("event=finish exit=0" in l and "receiver ended the session" in l for l in c.daemon.stderr_lines)
        # No media after the end: the router's RTP count towards the receiver stays put.
        rtp0 = w.router.stats()["a->b"]["classes"]["rtp"]["packets"]
        await asyncio.sleep(1.0)
        rtp1 = w.router.stats()["a->b"]["classes"]["rtp"]["packets"]
        ok = res.get("ok") and rc == 0 and took <= 2.0 and said and rtp1 == rtp0
        return check(r, ok, f"exit {rc} {took} s after session-end; message {'given' if said else 'MISSING'}; "
                            f"{rtp1 - rtp0} RTP packets in the second after exit", exit=rc, exit_s=took,
                     rtp_after_exit=rtp1 - rtp0)


async def sigkill_then_restart(w: World) -> Result:
    r = Result("SIGKILL then restart", "the stack's cleanup job ends the session (heartbeat silence); the next "
                                       "`castd --session` start says the session is over, exit ≠ 0 or 0 with a clear sentence")
    from castkit.castd_proc import castd_env, run_castd
    async with casting(w, r.name) as c:
        await asyncio.sleep(2)
        c.daemon.signal(signal.SIGKILL)
        await c.daemon.wait(timeout=10)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 150:
            rep = await c.report()
            if any(s in ("disconnected", "expired", "ended") for s in rep["statuses"][3:]):
                break
            await asyncio.sleep(2)
        ended_s = round(time.monotonic() - t0, 1)
        rep = await c.report()
        env = castd_env(c.stack, c.state_home, DISPLAY=w.screen.display)
        rc, out, err = await run_castd(env, "--session", c.session_id, timeout=60)
        (c.dir / "restart.log").write_text(out + err)
        said = [l for l in err.splitlines() if l.startswith("castd: ")]
        ok = rc is not None and rc >= 0 and bool(said) and re.search(r"ended|over|expired", " ".join(said), re.I) is not None
        return check(r, ok, f"status {rep['statuses'][-1:]} {ended_s} s after SIGKILL; the restart exited {rc}: {said}",
                     statuses=rep["statuses"], ended_after_s=ended_s, restart_exit=rc, said=said)


async def authorization_cap(w: World) -> Result:
    r = Result("authorization expiry at the cap", "the heartbeat brings sender_auth_expires_at down to connected_at + "
               f"cap ({AUTH_CAP_S} s here, 12 h in production); at that time castd stops with 'Authorization "
               "expired; pair again.' and a non-zero exit (within 2 s), and the cleanup job ends the session (spec §10)")
    from castkit.devstack import db
    stack = CAP_STACK.get(w)
    async with casting(w, r.name, stack=stack) as c:
        conn = await db(stack)
        try:
            row = None
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:      # until a heartbeat has applied the cap
                row = await conn.fetchrow("select connected_at, sender_auth_expires_at, "
                                          "extract(epoch from sender_auth_expires_at - now()) as left_s "
                                          "from public.casting_sessions where id = $1", __import__("uuid").UUID(c.session_id))
                if row and row["connected_at"] and (row["sender_auth_expires_at"] - row["connected_at"]).total_seconds() <= AUTH_CAP_S + 1:
                    break
                await asyncio.sleep(1)
            capped = row is not None and row["connected_at"] is not None and \
                (row["sender_auth_expires_at"] - row["connected_at"]).total_seconds() <= AUTH_CAP_S + 1
            expires_mono = time.monotonic() + float(row["left_s"]) if capped else None
            try:
                rc, _ = await c.daemon.wait(timeout=AUTH_CAP_S + 30)
            except asyncio.TimeoutError:
                rc = None
            exit_at = time.monotonic()
            said = any("Authorization expired; pair again." in l for l in c.daemon.stderr_lines)
            late = round(exit_at - expires_mono, 2) if expires_mono else None
            status = None
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                status = (await c.rx.cmd(cmd="status")).get("status")
                if status in ("disconnected", "expired"):
                    break
                await asyncio.sleep(1)
        finally:
            await conn.close()
        ok = (capped and rc not in (None, 0) and said and late is not None and -0.5 <= late <= 2.0
              and status == "disconnected")
        return check(r, ok, f"cap applied: {capped}; castd exit {rc} {late} s after the expiry; message "
                            f"{'given' if said else 'MISSING'}; session {status}", capped=capped, exit=rc,
                     exit_after_expiry_s=late, status=status)
