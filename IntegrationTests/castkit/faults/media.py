"""Rows of the media family (issue 17): faults injected into the encoder and the capture through
the test-only CASTD_TEST_FAULT hook, and a stuck castd killed by the systemd watchdog."""
from __future__ import annotations

import asyncio
import signal
import time

from castkit.faults.world import Result, World, casting, check, log_time


async def media_fault_recovers(w: World, name: str, fault: str, marker: str) -> Result:
    """Issue 17: a media fault injected 6 s into the cast (CASTD_TEST_FAULT, test-only)
    reaches the session, which reopens the encoder and the capture; frames come back."""
    r = Result(name, "the failure reaches the session; media reopened once (1 s backoff); ≥ 30 frames again "
                     "within 15 s; castd alive, exit 0 on SIGTERM")
    async with casting(w, name, extra_env={"CASTD_TEST_FAULT": fault}) as c:
        t_fault = await log_time(c, marker, 30)
        t_restart = await log_time(c, "event=media_restart", 20)
        first = await c.wait_frames(30, timeout=15, since=t_restart)
        frames = (await c.report())["frames"]
        gap = max((b - a for a, b in zip(frames, frames[1:]) if a >= t_fault - 1.0), default=0.0)
        alive = c.daemon.proc.returncode is None
        c.daemon.signal()
        rc, _ = await c.daemon.wait(timeout=5)
        restarts = len(c.log_lines("event=media_restart"))
        ok = alive and rc == 0 and restarts == 1
        return check(r, ok, f"restart {t_restart - t_fault:.1f} s after the fault, frames back {first - t_fault:.1f} s "
                            f"after it (longest gap {gap:.1f} s); {restarts} restart(s); exit {rc}",
                     restart_s=round(t_restart - t_fault, 1), frames_back_s=round(first - t_fault, 1),
                     max_gap_s=round(gap, 1), restarts=restarts, exit=rc)


async def encoder_fails_once(w: World) -> Result:
    return await media_fault_recovers(w, "media: encoder fails once", "encoder-fail-once", "event=encode_failed")


async def capture_stalls(w: World) -> Result:
    return await media_fault_recovers(w, "media: capture stalls", "capture-stall", "event=test_fault fault=capture-stall")


async def encoder_fails_always(w: World) -> Result:
    r = Result("media: encoder never starts", "3 restarts (1, 2, 4 s apart), then disconnect media_failed, "
                                              "session end, exit 1 with a sentence")
    async with casting(w, r.name, wait_frames=False, extra_env={"CASTD_TEST_FAULT": "encoder-fail-always"}) as c:
        t0 = c.started_at
        rc, _ = await c.daemon.wait(timeout=40)
        took = time.monotonic() - t0
        restarts = len(c.log_lines("event=media_restart"))
        said = any("gave up after 3 restarts" in l for l in c.daemon.stderr_lines)
        ok = rc == 1 and restarts == 3 and said
        return check(r, ok, f"exit {rc} {took:.1f} s after start, {restarts} restarts, sentence "
                            f"{'given' if said else 'MISSING'}", exit=rc, exit_s=round(took, 1), restarts=restarts)


async def watchdog_stuck(w: World) -> Result:
    """Issue 17: a castd whose capture thread hangs (and ignores stop) stops feeding the watchdog;
    a NOTIFY_SOCKET listener playing systemd's part (WatchdogSec=6) kills it with SIGABRT."""
    from castkit.notify_listener import NotifyListener
    r = Result("watchdog: stuck castd killed", "READY=1 and WATCHDOG=1 while casting; after the hang castd "
                                                "sees the stall, the media stop never returns, WATCHDOG=1 stops, "
                                                "the listener (WatchdogSec=6) sends SIGABRT")
    sock = w.out / "notify.sock"
    sock.unlink(missing_ok=True)
    listener = await NotifyListener.start(sock, 6.0)
    try:
        async with casting(w, r.name, extra_env={"CASTD_TEST_FAULT": "stuck", "SWIFT_BACKTRACE": "enable=no",
                                                  **listener.env()}) as c:
            listener.supervise(c.daemon.proc.pid)
            t_fault = await log_time(c, "event=test_fault fault=stuck", 30)
            rc = await asyncio.wait_for(c.daemon.proc.wait(), 60)
            killed = listener.killed_at
            pings = listener.pings()
            ready = bool(listener.values("READY"))
            starved = bool(c.log_lines("event=watchdog_starved"))
            ok = ready and killed is not None and rc == -signal.SIGABRT and starved
            kill_s = round(killed - t_fault, 1) if killed else None
            return check(r, ok, f"READY {'seen' if ready else 'MISSING'}; {len(pings)} pings; killed "
                                f"{kill_s} s after the hang (exit {rc})", kill_after_hang_s=kill_s, exit=rc,
                         pings=len(pings))
    finally:
        await listener.close()
