"""Rows of the link-cut family: the media path cut for 4, 15 and 60 s, and consent freshness
(the receiver's STUN answers dropped): spec §11, RFC 7675."""
from __future__ import annotations

import asyncio
import re
import time

from castkit.faults.world import Result, World, casting, check


async def cut_short(w: World, name="link cut 4 s", seconds=4.0) -> Result:
    r = Result(name, "ICE recovers without renegotiation: no re-offer; frames resume within 3 s of the link returning "
                     "(spec §11, issue 8 §2)")
    async with casting(w, name) as c:
        await asyncio.sleep(2)
        w.router.control(cmd="cut")
        t_cut = time.monotonic()
        await asyncio.sleep(seconds)
        w.router.control(cmd="restore")
        t_back = time.monotonic()
        first = await c.wait_frames(10, timeout=30, since=t_back)
        rep = await c.report()
        offers = [x["negotiationId"] for x in rep["rows"] if x["type"] == "offer"]
        reconnects = c.log_lines("event=reconnect")
        ok = len(offers) == 1 and not reconnects and c.daemon.proc.returncode is None and first - t_back <= 3.0
        ice_back = c.first_line_after("state=connected", t_back)
        return check(r, ok, f"{len(offers)} offer(s), {len(reconnects)} reconnects, frames back "
                            f"{first - t_back:.1f} s after the link returned",
                     resume_s=round(first - t_back, 2), offers=len(offers),
                     ice_connected_again_s=round(ice_back - t_back, 2) if ice_back else None,
                     peer_states=[l.split("state=")[-1] for l in c.log_lines("event=peer_state")],
                     cut_s=round(t_back - t_cut, 1))


async def cut_medium(w: World) -> Result:
    r = Result("link cut 15 s", "§11 re-offer with a new negotiationId; the viewer resumes within 3 s of the link returning")
    async with casting(w, r.name) as c:
        await asyncio.sleep(2)
        w.router.control(cmd="cut")
        await asyncio.sleep(15)
        w.router.control(cmd="restore")
        t_back = time.monotonic()
        first = await c.wait_frames(5, timeout=40, since=t_back)
        rep = await c.report()
        offers = [x["negotiationId"] for x in rep["rows"] if x["type"] == "offer"]
        resumed = first - t_back
        ok = len(offers) >= 2 and len(set(offers)) == len(offers) and resumed <= 3.0
        return check(r, ok, f"{len(offers)} offers (distinct negotiationIds: {len(set(offers))}); frames "
                            f"{resumed:.1f} s after the link returned", offers=len(offers), resume_s=round(resumed, 2),
                     reconnects=[l.split("event=reconnect ")[-1] for l in c.log_lines("event=reconnect")])


async def cut_long(w: World) -> Result:
    r = Result("link cut 60 s", "three re-offers 1 s, 3 s, 7 s after detection, then disconnect failed, end, "
                                "a clear message, exit ≠ 0 (spec §11)")
    async with casting(w, r.name) as c:
        await asyncio.sleep(2)
        w.router.control(cmd="cut")
        t_cut = time.monotonic()
        try:
            rc, _ = await c.daemon.wait(timeout=60)
        except asyncio.TimeoutError:
            rc = None
        took = time.monotonic() - t_cut
        rep = await c.report()
        status = (await c.rx.cmd(cmd="status")).get("status")     # session-update end → disconnected
        offers = [x["negotiationId"] for x in rep["rows"] if x["type"] == "offer"]
        disc = [x["payload"] for x in rep["rows"] if x["type"] == "disconnect"]
        delays = [float(m) for l in c.log_lines("event=reconnect") for m in re.findall(r"delay_s=([0-9.]+)", l)]
        said = [l for l in c.daemon.stderr_lines if l.startswith("castd: ")]
        ok = (rc not in (None, 0) and delays == [1.0, 3.0, 7.0] and disc == [{"reason": "failed"}]
              and len(set(offers)) == 4 and status == "disconnected")
        return check(r, ok, f"exit {rc} after {took:.0f} s; delays {delays}; disconnect {disc}; session {status}; said {said}",
                     exit=rc, delays=delays, offers=len(offers), seconds_to_exit=round(took, 1), session_status=status,
                     statuses_seen_by_realtime=rep["statuses"])


async def consent_freshness(w: World) -> Result:
    r = Result("consent freshness", "media to a receiver that stops answering castd's STUN stops within the 30 s "
                                    "consent timeout (RFC 7675 §5.1) but not at once (> 5 s); then §11: a re-offer "
                                    "with a new negotiationId, and the cast resumes once the receiver answers again")
    async with casting(w, r.name) as c:
        await asyncio.sleep(3)

        def rtp_sent() -> int:
            return w.router.stats()["a->b"]["classes"]["rtp"]["packets"]
        before = (await c.report())["negotiation_id"]
        # Only the receiver's STUN towards castd is lost (answers to castd's consent checks, and its own
        # checks); castd → receiver, media included, still works.
        w.router.control(cmd="set", drop_class="stun", drop_dir="b->a")
        t_drop = time.monotonic()
        last, last_change = rtp_sent(), t_drop
        while time.monotonic() - t_drop < 45:
            await asyncio.sleep(0.5)
            n = rtp_sent()
            if n != last:
                last, last_change = n, time.monotonic()
            elif time.monotonic() - last_change >= 4:
                break
        stopped_s = last_change - t_drop
        rep = await c.report()
        frames_while_dropping = sum(1 for t in rep["frames"] if t_drop < t <= last_change)
        # What castd does next (spec §11): a new offer with a new negotiationId.
        deadline = time.monotonic() + 15
        offers = [x["negotiationId"] for x in rep["rows"] if x["type"] == "offer"]
        while len(offers) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            offers = [x["negotiationId"] for x in (await c.report())["rows"] if x["type"] == "offer"]
        reoffer_s = time.monotonic() - t_drop if len(offers) >= 2 else None
        st = w.router.stats()
        w.router.control(cmd="set", drop_class=None)
        t_back = time.monotonic()
        try:
            resumed = round(await c.wait_frames(5, timeout=30, since=t_back) - t_back, 2)
        except TimeoutError:
            resumed = None
        ok = (5.0 < stopped_s <= 32.0 and frames_while_dropping > 0 and len(offers) >= 2
              and len(set(offers)) == len(offers) and offers[0] == before and resumed is not None and resumed <= 5.0
              and c.daemon.proc.returncode is None)
        return check(r, ok, f"RTP stopped {stopped_s:.1f} s after the receiver's STUN was dropped (the receiver "
                            f"decoded {frames_while_dropping} frames meanwhile); {len(offers)} offers (distinct "
                            f"{len(set(offers))}), the re-offer {reoffer_s and round(reoffer_s, 1)} s after the drop; "
                            f"frames {resumed} s after STUN came back",
                     rtp_stopped_s=round(stopped_s, 2), frames_while_dropping=frames_while_dropping,
                     offers=len(offers), reoffer_s=reoffer_s and round(reoffer_s, 1), resume_s=resumed,
                     stun_dropped_b_to_a=st["b->a"]["lost_class"],
                     peer_states=[l.split("state=")[-1] for l in c.log_lines("event=peer_state")],
                     reconnects=[l.split("event=reconnect ")[-1] for l in c.log_lines("event=reconnect")])
