"""Rows of the backend family: the stack failing under a running cast: Realtime sockets cut,
the gateway and PostgreSQL restarted, REST answering 500, a P0429 storm, 60 s access tokens
(issue 8 §3)."""
from __future__ import annotations

import asyncio
import re
import time

from castkit.faults.world import TOKEN_STACK, Cast, Result, World, casting, check, frame_figures


async def backend_fault(w: World, name: str, expected: str, fault, settle: float = 2.0) -> Result:
    """A cast, a backend fault (an async fn of the cast returning figures), then: castd still casting,
    no freeze over 1 s, and signaling working again (a probe row reaches castd)."""
    r = Result(name, expected)
    async with casting(w, name) as c:
        await asyncio.sleep(settle)
        t0 = time.monotonic()
        figs = await fault(c) or {}
        probe_s = await c.probe("after", timeout=60)
        t1 = time.monotonic()
        rep = await c.report()
        f = frame_figures(rep["frames"], t0, t1)
        alive = c.daemon.proc.returncode is None
        interrupted = len(c.log_lines("event=realtime_interrupted"))
        subscribed = len(c.log_lines("event=subscribed"))
        ok = alive and probe_s is not None and f["freezes_over_1s"] == 0 and figs.pop("_ok", True)
        return check(r, ok, f"castd {'casting' if alive else 'EXITED'}; {f['fps']} fps, longest gap {f['max_gap_s']} s; "
                            f"a row inserted after the fault reached castd {'after %s s' % probe_s if probe_s is not None else 'NEVER'}; "
                            f"Realtime interrupted {interrupted}×, subscribed {subscribed}×",
                     **f, probe_s=probe_s, realtime_interrupted=interrupted, subscribed=subscribed, **figs)


async def realtime_cuts(w: World) -> Result:
    async def fault(c: Cast) -> dict:
        delays, dropped = [], 0
        for k in range(5):
            dropped += (await w.admin("realtime-drop"))["dropped"]
            d = await c.probe(f"cut{k}", timeout=30)      # inserted while castd's socket is down
            delays.append(d)
            await asyncio.sleep(3)
        return {"_ok": all(d is not None for d in delays), "sockets_dropped": dropped, "rows_delivered_after_s": delays}
    return await backend_fault(w, "Realtime socket cut ×5", "re-subscribe + backfill: no signaling row lost, the cast never "
                                                             "stops (issue 8 §3)", fault)


async def gateway_restart(w: World) -> Result:
    async def fault(c: Cast) -> dict:
        t = time.monotonic()
        await w.devstack_restart("gateway", 5)
        return {"gateway_down_s": round(time.monotonic() - t, 1)}
    return await backend_fault(w, "gateway restart", "the gateway down ~5 s and back: castd re-subscribes, the cast goes on",
                               fault)


async def postgres_restart(w: World) -> Result:
    async def fault(c: Cast) -> dict:
        t = time.monotonic()
        await w.devstack_restart("postgres", 5)
        return {"postgres_down_s": round(time.monotonic() - t, 1)}
    return await backend_fault(w, "PostgreSQL restart", "PostgreSQL down ~5 s and back: signaling and heartbeats recover, "
                                                        "the cast goes on", fault)


async def rest_errors(w: World) -> Result:
    async def fault(c: Cast) -> dict:
        await w.admin("errors", {"status": 500, "seconds": 30, "prefixes": ["/rest/v1", "/api/public", "/auth/v1"]})
        await asyncio.sleep(1)
        await w.admin("realtime-drop")          # castd must re-subscribe and backfill through the failing REST
        await asyncio.sleep(31)
        async with __import__("aiohttp").ClientSession() as http:
            async with http.get(f"{w.stack.api_url}/admin/faults/status") as resp:
                served = (await resp.json())["served"]
        return {"error_answers": served, "castd_failures_logged": len(c.log_lines("_failed"))}
    return await backend_fault(w, "REST 500 for 30 s", "REST, API and Auth answer 500 for 30 s (and Realtime drops): "
                                                       "castd retries, the cast goes on, signaling recovers", fault)


async def short_tokens(w: World) -> Result:
    minutes = w.a.token_minutes
    r = Result(f"60 s access tokens over {minutes:g} min", "castd refreshes before expiry: no 401 reaches it, the cast "
                                                         "goes on, signaling works at the end (issue 8 §3)")
    async with casting(w, r.name, stack=TOKEN_STACK.get(w)) as c:
        t0 = time.monotonic()
        await asyncio.sleep(minutes * 60)
        probe_s = await c.probe("end", timeout=30)
        t1 = time.monotonic()
        rep = await c.report()
        f = frame_figures(rep["frames"], t0, t1)
        unauthorized = [l for l in c.daemon.stderr_lines
                        if re.search(r"\b(status|code)=\"?(401|unauthori[sz]ed)\b|unauthori[sz]ed|invalid.?jwt|token.{0,20}expired",
                                     l, re.I)]
        alive = c.daemon.proc.returncode is None
        ok = alive and probe_s is not None and not unauthorized and f["freezes_over_1s"] == 0
        return check(r, ok, f"castd {'casting' if alive else 'EXITED'} after {minutes:g} min; {f['fps']} fps, longest gap "
                            f"{f['max_gap_s']} s; {len(unauthorized)} auth errors logged; end probe "
                            f"{'after %s s' % probe_s if probe_s is not None else 'NEVER delivered'}",
                     **f, probe_s=probe_s, auth_errors=unauthorized[:5])


async def p0429_storm(w: World) -> Result:
    r = Result("P0429 storm", "the receiver's rows exhaust the session's budget (60 rows / 20 s here) while castd must "
                              "re-offer: castd backs off on P0429, its rows arrive once the window allows, the viewer "
                              "resumes, nothing crashes (issue 8 §3)")
    async with casting(w, r.name, stack=TOKEN_STACK.get(w)) as c:
        await asyncio.sleep(2)
        storm = await c.rx.cmd(cmd="insert", rows=[{"message_type": f"refresh_{i}", "payload": {}} for i in range(80)],
                               timeout=120)
        w.router.control(cmd="cut")
        # castd declares the peer lost and re-offers into the exhausted budget: ICE is disconnected
        # 7 s after the last consent answer (up to 5 s before the cut), §11 re-offers 5 s later.
        await asyncio.sleep(15)
        w.router.control(cmd="restore")
        t_back = time.monotonic()
        try:
            first = await c.wait_frames(5, timeout=90, since=t_back)
            resumed = round(first - t_back, 1)
        except (TimeoutError, RuntimeError):
            resumed = None
        rep = await c.report()
        limited = c.log_lines("signaling_rate_limited") + c.log_lines("code=P0429")
        rc = c.daemon.proc.returncode
        ok = resumed is not None and rc is None and bool(limited)
        said = [l for l in c.daemon.stderr_lines if l.startswith("castd: ")]
        return check(r, ok, f"storm: {storm.get('inserted')} rows in, {storm.get('error_count')} refused "
                            f"({', '.join(sorted(set(storm.get('errors', []))))}); castd hit P0429 {len(limited)}×; "
                            f"viewer {'resumed %s s after the link returned' % resumed if resumed is not None else 'did NOT resume'}; "
                            f"castd {'casting' if rc is None else f'exit {rc} {said}'}",
                     storm_inserted=storm.get("inserted"), storm_refused=storm.get("error_count"), castd_p0429=len(limited),
                     resume_s=resumed, offers=sum(1 for x in rep["rows"] if x["type"] == "offer"),
                     receiver_rows_retried_after_p0429=rep.get("rate_limited"))
