"""The world every Scripts/faults row runs in, and what the rows share.

World: castd's namespace (the stack, Xvfb, the TUN delay router) and the receiver's; Cast: one
session (a receiver process, `castd pair`, `castd --session`) and what it measures; Result and
check: a row's outcome. The extra stacks with other durations (tokens, authorization cap) are
started on first use and stopped by the run.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from castkit import rxproc
from castkit.paths import DEVSTACK


def process_sample(pid: int) -> tuple[int, int, float]:
    """(resident KiB, open descriptors, CPU seconds: user + system) of a running process, from /proc."""
    rss = int(re.search(r"VmRSS:\s+(\d+)", Path(f"/proc/{pid}/status").read_text()).group(1))
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return rss, len(os.listdir(f"/proc/{pid}/fd")), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


C_VETH, R_VETH = "10.78.9.1", "10.78.9.2"
C_TUN, R_TUN = "10.77.0.1", "10.77.0.2"
VICTIM = "10.77.0.9"          # inside the TUN subnet, held by nobody: the "victim" of hostile candidates


@dataclass
class Result:
    name: str
    expected: str
    observed: str = ""
    figures: dict = field(default_factory=dict)
    status: str = "fail"          # pass | fail | known | not implemented | error
    seconds: float = 0.0


def check(r: Result, ok: bool, observed: str, **figures) -> Result:
    r.status = "pass" if ok else "fail"
    r.observed = observed
    r.figures.update(figures)
    return r


def sh(*args: str, check_: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=check_, capture_output=True, text=True)


class ReceiverProc(rxproc.ReceiverProc):
    """The receiver in the receiver namespace, driven by JSON lines: receiver_proc.py (aiortc),
    or with chromium=True chromium_proc.py (the receiver pages in headless Chromium)."""

    @classmethod
    async def start(cls, world: "World", log: Path, stack=None, chromium: bool = False,
                    twcc: bool = False) -> "ReceiverProc":
        from castkit.confine import CONFINED_ENV, confined_env_value
        stack = stack or world.stack
        port = int(stack.api_url.rsplit(":", 1)[1])
        env = None
        if chromium:
            # The pages find the stack at the URLs its config.js names (127.0.0.1 and localhost);
            # chromium_proc forwards those to C_VETH. The namespace is the confinement (see the
            # module's docstring): the browser needs no guard of its own.
            cfg = {"api_url": stack.api_url, "forward_to": C_VETH}
            env = dict(os.environ, **{CONFINED_ENV: confined_env_value(world.ns_r)})
        else:
            cfg = {"api_url": f"http://{C_VETH}:{port}", "supabase_url": f"http://{C_VETH}:{port}", "key": stack.key}
            if twcc:    # transport-cc feedback and no REMB, as Chromium answers (castkit/twcc_feedback.py)
                cfg["twcc"] = True
        return await cls.spawn(["ip", "netns", "exec", world.ns_r], cfg, log, chromium=chromium, env=env)


class World:
    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.ns_c, self.ns_r = os.environ["FAULTS_NS_C"], os.environ["FAULTS_NS_R"]
        self.out = Path(a.out)
        self.stack = None
        self.port = 0
        self.screen = None
        self.router = None
        self.secrets: set[str] = set()      # every secret this run handed out, for the final grep

    async def start(self) -> None:
        from castkit.devstack import devstack_up
        from castkit.netns import RouterProc
        from castkit.xscreen import XScreen
        # A generous signaling budget: the hostile rows insert thousands of rows; P0429 has its own scenario.
        # heartbeat-silence 75 s and a cleanup every 5 s: the SIGKILL scenario sees the stack end the
        # session in about 80 s; castd heartbeats every 30 s, so one lost heartbeat (REST 500 for 30 s) is fine.
        self.stack = devstack_up(listen="0.0.0.0", signaling_rate_limit=100000, fault_hooks=1,
                                 heartbeat_silence=75, cleanup_interval=5)
        self.port = int(self.stack.api_url.rsplit(":", 1)[1])
        self.screen = await XScreen(1920, 1080).start()
        self.router = RouterProc(self.ns_c, self.ns_r, C_TUN, R_TUN, seed=self.a.seed).__enter__()

    async def admin(self, path: str, body: dict | None = None, stack=None) -> dict:
        import aiohttp
        stack = stack or self.stack
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{stack.api_url}/admin/faults/{path}", json=body or {}) as r:
                return await r.json()

    async def devstack_restart(self, service: str, down_seconds: float) -> None:
        p = await asyncio.create_subprocess_exec(str(DEVSTACK), "restart", service,
                                                 "--state-dir", self.stack.state_dir, "--down-seconds", str(down_seconds),
                                                 stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"devstack restart {service}: {out.decode()[-500:]}")

    def impair(self, **kw) -> None:
        base = {"delay_ms": 0, "jitter_ms": 0, "loss": 0, "burst": "", "reorder": 0, "drop_class": None}
        self.router.control(cmd="set", **{**base, **kw})

    async def stop(self) -> None:
        from castkit.devstack import devstack_down
        if self.router:
            self.router.__exit__(None, None, None)
        if self.screen:
            self.screen.stop()
        if self.stack:
            gw = Path(self.stack.state_dir) / "gateway.log"
            if gw.exists():
                shutil.copy(gw, self.out / "gateway.log")
            devstack_down(self.stack.state_dir)


class Cast:
    """One session: a receiver process, `castd pair`, then `castd --session` casting the Xvfb screen."""

    def __init__(self, world: World, name: str, stack=None, chromium: bool = False, twcc: bool = False):
        self.world, self.name = world, name
        self.chromium = chromium
        self.twcc = twcc
        self.stack = stack or world.stack
        self.dir = world.out / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.state_home = self.dir / "state"
        self.rx: ReceiverProc | None = None
        self.daemon = None
        self.session_id = ""
        self.started_at = 0.0

    async def start(self, prefs=None, wait_frames=True, extra_env=None, tamper=False, display=None) -> "Cast":
        from castkit.castd_proc import Daemon, castd_env, run_castd
        w = self.world
        self.rx = await ReceiverProc.start(w, self.dir / "receiver.log", self.stack, chromium=self.chromium,
                                          twcc=self.twcc)
        s = await self.rx.cmd(cmd="create")
        self.session_id = s["sessionId"]
        w.secrets.add(s["pin"])
        if tamper:      # every answer of this receiver carries a wrong DTLS fingerprint
            await self.rx.cmd(cmd="tamper", fingerprint=True)
        env = castd_env(self.stack, self.state_home, DISPLAY=display or w.screen.display, **(extra_env or {}))
        pair = asyncio.create_task(run_castd(env, "pair", "--pin", s["pin"], "--json", "--log-level", "debug"))
        ok = await self.rx.cmd(cmd="approve", prefs=prefs or {"autoQuality": True, "resolution": "1080p", "frameRate": 30})
        rc, out, err = await pair
        (self.dir / "pair.log").write_text(out + err)
        if rc != 0 or "error" in ok:
            raise RuntimeError(f"pairing failed ({rc}): {ok} {err[-500:]}")
        self.collect_secrets()
        self.daemon = await Daemon.start(env, self.session_id)
        self.started_at = time.monotonic()
        if wait_frames:
            await self.wait_frames(30, timeout=60)
        return self

    def collect_secrets(self) -> None:
        cred = self.state_home / "castd" / "credentials.json"
        if cred.exists():
            def walk(v):
                if isinstance(v, dict):
                    for k, x in v.items():
                        if isinstance(x, str) and re.search(r"token|secret|key", k, re.I) and len(x) >= 8:
                            self.world.secrets.add(x)
                        walk(x)
                elif isinstance(v, list):
                    for x in v:
                        walk(x)
            walk(json.loads(cred.read_text()))

    async def report(self) -> dict:
        return await self.rx.cmd(cmd="report")

    async def wait_frames(self, n: int, timeout: float, since: float | None = None) -> float:
        """Wait until n frames arrived after `since` (monotonic); returns when the first of them came."""
        return await rxproc.wait_frames(self, n, timeout, since)

    def log_lines(self, text: str) -> list[str]:
        return [l for l in self.daemon.stderr_lines if text in l] if self.daemon else []

    def first_line_after(self, text: str, t: float) -> float | None:
        """When the first castd log line containing text arrived after t (monotonic), or None."""
        d = self.daemon
        return next((ts for ts, l in zip(d.stderr_times, d.stderr_lines) if ts > t and text in l), None)

    async def probe(self, tag: str, timeout: float = 30) -> float | None:
        """Insert a row of an unknown type as the receiver and wait for castd to log it (signaling
        works end to end); seconds it took, or None. Retries the insert while the backend refuses it."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            ins = await self.rx.cmd(cmd="insert", rows=[{"message_type": f"probe_{tag}", "payload": {}}])
            if ins.get("inserted"):
                break
            await asyncio.sleep(1)
        while time.monotonic() - t0 < timeout:
            if self.log_lines(f"type=probe_{tag} "):
                return round(time.monotonic() - t0, 2)
            await asyncio.sleep(0.1)
        return None

    def frames_sent(self, t0: float, t1: float) -> tuple[float, int] | None:
        return daemon_frames_sent(self.daemon, t0, t1)

    def sent_fps(self, t0: float, t1: float) -> float | None:
        return daemon_sent_fps(self.daemon, t0, t1)

    def stats_lines(self) -> list[dict]:
        out = []
        for l in self.log_lines("event=stats"):
            out.append({k: int(v) for k, v in re.findall(r"(\w+)=(-?\d+)\b", l)})
        return out

    async def stop(self) -> int | None:
        rc = None
        if self.daemon:
            if self.daemon.proc.returncode is None:
                self.daemon.signal(signal.SIGTERM)
                try:
                    rc, _ = await self.daemon.wait(timeout=10)
                except asyncio.TimeoutError:
                    await self.daemon.kill()
            rc = self.daemon.proc.returncode
            (self.dir / "castd.log").write_text("\n".join(self.daemon.stderr_lines) + "\n")
        if self.rx:
            await self.rx.close()
        return rc


@contextlib.asynccontextmanager
async def casting(w: World, name: str, stack=None, chromium: bool = False, twcc: bool = False, **start):
    """A running cast for one scenario; afterwards the link is whole and unimpaired again and castd stopped.
    `twcc`: the aiortc receiver sends transport-cc feedback and no REMB, as Chromium does."""
    c = Cast(w, name, stack, chromium, twcc)
    try:
        yield await c.start(**start)
    finally:
        w.router.control(cmd="restore")
        w.impair()
        await c.stop()


def frame_figures(frames: list[float], t0: float, t1: float) -> dict:
    fr = [t for t in frames if t0 <= t <= t1]
    gaps = [b - a for a, b in zip([t0] + fr, fr + [t1])]
    return {"fps": round(len(fr) / (t1 - t0), 1), "frames": len(fr), "max_gap_s": round(max(gaps), 2),
            "freezes_over_1s": sum(1 for g in gaps if g > 1.0)}


def router_lost(w: World) -> int:
    """Packets the router has dropped on the way to the receiver since it started (all rows)."""
    st = w.router.stats()["a->b"]
    return st["lost_random"] + st["lost_burst"]


def delta(stats: list[dict], key: str) -> int:
    return stats[-1].get(key, 0) - stats[0].get(key, 0) if len(stats) >= 2 else 0


def stats_delta(a: dict, b: dict, key: str):
    """b[key] - a[key] of two getStats summaries of the viewer page: None when the browser does
    not expose it; a counter that appears only later (retransmittedPacketsReceived comes with
    the first RTX packet) started at 0."""
    if b.get(key) is None:
        return None
    return round(b[key] - (a.get(key) or 0), 3)


async def log_time(c: "Cast", text: str, timeout: float) -> float:
    """Waits for `text` in castd's log; returns when the line arrived (monotonic)."""
    await c.daemon.wait_log(text, timeout=timeout)
    return next(t for l, t in zip(c.daemon.stderr_lines, c.daemon.stderr_times) if text in l)


# The delay and jitter of the lossy rows.
LOSSY = {"delay_ms": 20, "jitter_ms": 10}          # 40 ms RTT, 10 ms jitter each way


AUTH_CAP_S = 75       # the sender authorization cap of the third stack (12 h in production)


class ExtraStack:
    """A further stack for the scenarios that need other durations, started on first use and
    stopped at the end of the run (its gateway log kept as gateway-<tag>.log)."""

    def __init__(self, tag: str, **options):
        self.tag, self.options, self.stack = tag, options, None

    def get(self, w: World):
        if self.stack is None:
            from castkit.devstack import devstack_up
            self.stack = devstack_up(listen="0.0.0.0", fault_hooks=1, **self.options)
        return self.stack

    def stop(self, w: World) -> None:
        from castkit.devstack import devstack_down
        if self.stack is not None:
            gw = Path(self.stack.state_dir) / "gateway.log"
            if gw.exists():
                shutil.copy(gw, w.out / f"gateway-{self.tag}.log")
            devstack_down(self.stack.state_dir)
            self.stack = None


# 60 s access tokens, and a compressed signaling budget (60 rows per 20 s) for the P0429 storm.
TOKEN_STACK = ExtraStack("tokens", access_token_ttl=60, signaling_rate_limit=60, signaling_rate_window=20)


# The sender authorization capped at AUTH_CAP_S from connected_at, the cleanup job every 5 s.
CAP_STACK = ExtraStack("cap", sender_auth_cap=AUTH_CAP_S, cleanup_interval=5)



def daemon_frames_sent(d, t0: float, t1: float) -> tuple[float, int] | None:
    """castd's own frames_sent counter between its first and last stats line in [t0, t1] of
    daemon `d`'s log (any cast's: `Cast`, `TurnCast`): (seconds between those lines, frames
    sent), or None with fewer than two lines."""
    got = [(t, int(m.group(1))) for t, l in zip(d.stderr_times, d.stderr_lines)
           if t0 <= t <= t1 and (m := re.search(r"event=stats .*\bframes_sent=(\d+)", l))]
    return (got[-1][0] - got[0][0], got[-1][1] - got[0][1]) if len(got) >= 2 else None


def daemon_sent_fps(d, t0: float, t1: float) -> float | None:
    """Frames castd sent per second between its first and last stats line in [t0, t1]."""
    sent = daemon_frames_sent(d, t0, t1)
    return round(sent[1] / sent[0], 1) if sent else None
