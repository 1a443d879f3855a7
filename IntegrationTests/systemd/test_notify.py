"""Issue 17: castd's side of the sd_notify protocol, with a listener that plays systemd's part
(castkit/notify_listener.py; no user manager runs on these machines). READY=1 comes once castd is
signed in and subscribed, before anyone approves; STATUS= follows the session; WATCHDOG=1 keeps
coming while the cast makes progress, and stops when castd is stuck, so the watchdog kills it."""
import asyncio
import signal
import time

import pytest


from castkit.castd_proc import Daemon, Receiver, castd_env, run_castd
from castkit.notify_listener import NotifyListener
from castkit.receiver_answerer import ReceiverAnswerer
from castkit.xscreen import XScreen

WATCHDOG_SEC = 6.0


async def wait_until(cond, timeout: float, what: str):
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, what
        await asyncio.sleep(0.05)


@pytest.mark.timeout(120)
async def test_ready_before_approval_then_the_watchdog_is_fed_while_casting_and_starved_when_stuck(stack, tmp_path):
    screen = await XScreen(320, 240).start()
    listener = await NotifyListener.start(tmp_path / "notify.sock", WATCHDOG_SEC)
    rx = Receiver(stack)
    await rx.create()
    sid = rx.session["sessionId"]
    pairing = asyncio.create_task(run_castd(castd_env(stack, tmp_path), "pair", "--pin", rx.session["pin"], "--json",
                                            timeout=60))
    daemon = answerer = None
    try:
        # The join request is in (so castd's identity exists); nobody has approved yet.
        async def join_request():
            while not any(r["message_type"] == "join_request" for r in await rx.client.select(sid, "receiver")):
                await asyncio.sleep(0.2)
        await asyncio.wait_for(join_request(), 30)
        answerer = ReceiverAnswerer(rx.client, sid)
        await answerer.start()
        # SWIFT_BACKTRACE off: Swift's crash backtracer would otherwise spend a long while on the
        # SIGABRT (systemd sends SIGKILL after TimeoutAbortSec= for that; this listener does not).
        env = castd_env(stack, tmp_path, DISPLAY=screen.display, CASTD_TEST_FAULT="stuck",
                        SWIFT_BACKTRACE="enable=no", **listener.env())
        t_start = time.monotonic()
        daemon = await Daemon.start(env, sid)
        listener.supervise(daemon.proc.pid)
        # READY while castd waits for the person to approve: the start timeout cannot race them.
        await wait_until(lambda: listener.values("READY"), 20, "no READY=1 before approval")
        await wait_until(lambda: any(v == "Waiting for the receiver to approve the request"
                                     for _, v in listener.values("STATUS")), 5, "no waiting STATUS")
        assert not pairing.done()
        await rx.client.api("session-approve", {"sessionId": sid, "approve": True})
        assert (await pairing)[0] == 0
        await daemon.wait_log("event=connected", timeout=30)
        await answerer.wait_frames(20, timeout=30)
        ready = [t for t, v in listener.values("READY") if v == "1"]
        assert len(ready) == 1, listener.messages
        statuses = [v for _, v in listener.values("STATUS")]
        assert statuses[0] == "Signing in and subscribing", statuses
        await wait_until(lambda: any(v.startswith("Casting: ") for _, v in listener.values("STATUS")), 5, "no Casting STATUS")
        # Fed regularly while casting (a third of WatchdogSec at most apart).
        pings = [t for t in listener.pings() if t >= ready[0]]
        assert pings and max(b - a for a, b in zip(pings, pings[1:])) <= WATCHDOG_SEC / 3 + 0.5, pings
        # The fault: the capture thread hangs and ignores stop. castd sees the stall, tries to
        # restart the media, the stop never returns: it stops feeding, and the watchdog fires.
        rc = await asyncio.wait_for(daemon.proc.wait(), 60)
        log = "\n".join(daemon.stderr_lines)
        assert listener.killed_at is not None, log[-3000:]
        assert rc == -signal.SIGABRT, (rc, log[-3000:])
        assert "event=media_stalled" in log and "event=watchdog_starved" in log, log[-3000:]
        last_ping = listener.pings()[-1]
        print(f"NOTIFY ready_s={ready[0] - t_start:.1f} pings_while_casting={len(pings)} "
              f"killed_s_after_last_ping={listener.killed_at - last_ping:.1f} "
              f"statuses={sorted(set(s.split(':')[0] for s in statuses))}")
        assert listener.killed_at - last_ping >= WATCHDOG_SEC
        assert any(s.startswith("Stuck: ") for _, s in listener.values("STATUS"))
    finally:
        if daemon:
            import os
            if os.environ.get("NOTIFY_DEBUG"):
                for l, t in zip(daemon.stderr_lines, daemon.stderr_times):
                    if "event=row " not in l:
                        print(f"{t - t_start:7.2f} {l[:160]}")
                print([(round(m.at - t_start, 2), m.fields) for m in listener.messages if "WATCHDOG" not in m.fields])
                print([round(t - t_start, 1) for t in listener.pings()][-15:])
            await daemon.kill()
        if answerer:
            await answerer.close()
        await listener.close()
        if not pairing.done():
            pairing.cancel()
        await rx.client.close()
        screen.stop()
