"""castd@.service under a real systemd user manager (castkit/user_manager.py: systemd 252's own
`systemd --user` for a test user with its own runtime directory; this machine was not booted
with systemd, so the test plays the two parts of the system manager it needs, a delegated
cgroup and /run/systemd/system, and says so).

The unit is systemd/castd@.service as Scripts/install places it (ExecStart pointed at the
user's copy of the release build); a drop-in shortens WatchdogSec to 3 s, so that a stuck castd
is caught in seconds, and sends castd's log to a file (no journald here). Shown: `systemctl
--user start` returns once castd sent READY=1; a cast runs (an aiortc receiver decodes frames);
the watchdog is fed while it runs (same PID after several periods); a frozen castd (SIGSTOP)
is killed by the watchdog and restarted (Restart=on-failure), then casts again; `systemctl
--user stop` ends it with exit 0; an exit status listed in RestartPreventExitStatus is not
restarted."""
from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from castkit.castd_build import binary
from castkit.castd_proc import Receiver
from castkit.paths import REPO
from castkit.user_manager import MANAGER, ThrowawayUser, UserManager, refusal_without_help
from castkit.xscreen import XScreen

UNIT = REPO / "systemd" / "castd@.service"
WATCHDOG_S = 3

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a test user and a delegated cgroup need root")


def test_systemd_user_refuses_on_its_own_here():
    """The finding docs/packaging.md records: as it is, the user manager will not start here."""
    if Path("/run/systemd/system").is_dir():
        pytest.skip("this machine was booted with systemd: the user manager starts as usual")
    rc, out = refusal_without_help()
    assert rc == 1
    assert out == "Trying to run as user instance, but the system has not been booted with systemd."


def install_for(u: ThrowawayUser, stack, display: str) -> None:
    """What Scripts/install lays out for a person, in the test user's home."""
    bin_dir = u.home / ".local" / "bin"
    bin_dir.mkdir(parents=True)
    shutil.copy(binary("castd"), bin_dir / "castd")
    units = u.home / ".config" / "systemd" / "user"
    (units / "castd@.service.d").mkdir(parents=True)
    unit = UNIT.read_text()
    assert "ExecStart=/usr/bin/castd --session %i" in unit.splitlines()
    (units / "castd@.service").write_text(unit.replace("ExecStart=/usr/bin/castd ", f"ExecStart={bin_dir}/castd "))
    (units / "castd@.service.d" / "test.conf").write_text(
        f"[Service]\nWatchdogSec={WATCHDOG_S}s\nStandardOutput=append:{u.home}/castd.log\n"
        f"StandardError=append:{u.home}/castd.log\n"
        # Why each run ended, as systemd tells ExecStopPost (no journald here to ask).
        f"ExecStopPost=/bin/sh -c 'echo \"%i $SERVICE_RESULT $EXIT_CODE $EXIT_STATUS\" >> {u.home}/ends.log'\n")
    conf = u.home / ".config" / "castd"
    conf.mkdir(parents=True, mode=0o700)
    (conf / "environment").write_text(f"CASTD_API_URL={stack.api_url}\nCASTD_SUPABASE_URL={stack.supabase_url}\n"
                                      f"CASTD_SUPABASE_KEY={stack.key}\nDISPLAY={display}\n")
    (conf / "environment").chmod(0o600)
    u.chown_tree(u.home)


async def pair_as(u: ThrowawayUser, stack) -> tuple[Receiver, str]:
    rx = Receiver(stack)
    s = await rx.create()
    env = {"HOME": str(u.home), "PATH": "/usr/bin:/bin", "CASTD_API_URL": stack.api_url,
           "CASTD_SUPABASE_URL": stack.supabase_url, "CASTD_SUPABASE_KEY": stack.key}
    p = await asyncio.create_subprocess_exec("runuser", "-u", u.name, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
                                             str(u.home / ".local/bin/castd"), "pair", "--pin", s["pin"], "--json",
                                             stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    await rx.wait_pairing_then(True, {"autoQuality": True, "resolution": "720p", "frameRate": 30})
    out, err = await asyncio.wait_for(p.communicate(), 60)
    assert p.returncode == 0, out.decode() + err.decode()
    return rx, s["sessionId"]


def ends(u: ThrowawayUser) -> list[str]:
    f = u.home / "ends.log"
    return f.read_text().splitlines() if f.exists() else []


async def frames_after(answerer, t: float, n: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = sum(1 for f in answerer.frames if f.arrived > t)
        if got >= n:
            return got
        await asyncio.sleep(0.2)
    return sum(1 for f in answerer.frames if f.arrived > t)


@pytest.mark.long
@pytest.mark.timeout(240)
async def test_the_unit_under_a_real_user_manager(stack):
    from castkit.receiver_answerer import ReceiverAnswerer
    if not os.path.exists(MANAGER):
        pytest.fail(f"{MANAGER} is missing: Scripts/bootstrap installs the systemd package")
    screen = await XScreen(1280, 720).start()
    try:
        with ThrowawayUser() as u:
            install_for(u, stack, screen.display)
            rx, sid = await pair_as(u, stack)
            answerer = ReceiverAnswerer(rx.client, sid, keep_frames=1)
            await answerer.start()
            try:
                with UserManager(u) as m:
                    await run_unit_checks(m, u, sid, answerer)
            finally:
                await answerer.close()
                await rx.client.close()
    finally:
        screen.stop()


async def run_unit_checks(m: UserManager, u: ThrowawayUser, sid: str, answerer) -> None:
    unit = f"castd@{sid}.service"
    props = ("ActiveState", "SubState", "MainPID", "NRestarts", "Result", "ExecMainStatus", "WatchdogUSec")
    log = lambda: (u.home / "castd.log").read_text() if (u.home / "castd.log").exists() else ""   # noqa: E731

    # Start: Type=notify, so `systemctl start` returns only once castd sent READY=1.
    t = time.monotonic()
    r = await asyncio.to_thread(m.systemctl, "start", unit)
    ready_s = time.monotonic() - t
    assert r.returncode == 0, r.stderr + log()[-2000:]
    s = await asyncio.to_thread(m.show, unit, *props)
    assert (s["ActiveState"], s["SubState"], s["NRestarts"]) == ("active", "running", "0"), s
    assert s["WatchdogUSec"] in (f"{WATCHDOG_S}s", str(WATCHDOG_S * 1_000_000)), s
    pid = int(s["MainPID"])
    assert await frames_after(answerer, t, 30, 60) >= 30, log()[-2000:]

    # The watchdog is fed: after several periods the same castd still runs.
    await asyncio.sleep(3 * WATCHDOG_S)
    s = await asyncio.to_thread(m.show, unit, *props)
    assert (s["ActiveState"], int(s["MainPID"]), s["NRestarts"]) == ("active", pid, "0"), s

    # A frozen castd feeds nothing: the watchdog kills it and Restart=on-failure starts another.
    os.kill(pid, signal.SIGSTOP)
    t_stop = time.monotonic()
    deadline = t_stop + 40
    while True:
        s = await asyncio.to_thread(m.show, unit, *props)
        if s["NRestarts"] == "1" and s["ActiveState"] == "active" and int(s["MainPID"]) not in (0, pid):
            break
        assert time.monotonic() < deadline, (s, log()[-2000:])
        await asyncio.sleep(0.5)
    restart_s = time.monotonic() - t_stop
    # systemd's reason for that end: the watchdog (SIGABRT), not a crash of castd's own.
    assert ends(u) == [f"{sid} watchdog dumped ABRT"] or ends(u) == [f"{sid} watchdog killed ABRT"], ends(u)
    t2 = time.monotonic()
    assert await frames_after(answerer, t2, 30, 60) >= 30, log()[-2000:]

    # Stop: SIGTERM, castd ends the cast cleanly and exits 0.
    r = await asyncio.to_thread(m.systemctl, "stop", unit)
    assert r.returncode == 0, r.stderr
    s = await asyncio.to_thread(m.show, unit, *props)
    assert (s["ActiveState"], s["Result"], s["ExecMainStatus"]) == ("inactive", "success", "0"), s
    assert ends(u)[-1] == f"{sid} success exited 0", ends(u)

    # An end that a restart cannot fix (exit 2: the instance name is no session id) is not restarted.
    bad = "castd@not-a-session.service"
    await asyncio.to_thread(m.systemctl, "start", bad)
    await asyncio.sleep(5)          # longer than RestartSec=3s: a restart would have happened
    s = await asyncio.to_thread(m.show, bad, *props)
    assert s["NRestarts"] == "0" and s["ActiveState"] in ("failed", "inactive"), s
    assert s["ExecMainStatus"] == "2" and ends(u)[-1] == "not-a-session exit-code exited 2", (s, ends(u))
    print(f"user manager {m.state}; READY after {ready_s:.1f} s; watchdog kill to a new castd: {restart_s:.1f} s; "
          f"ends: {ends(u)}")
