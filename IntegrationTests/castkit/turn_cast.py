"""The whole daemon through coturn: turn_world.py's two symmetric NATs, with the local stack
in the public namespace (its ice-config carries coturn's REST credentials: `Scripts/devstack
up --turn URL --turn-secret SECRET`), `castd pair` + `castd --session` in castd's namespace
casting an Xvfb screen, and the receiver (aiortc: receiver_proc.py, or the receiver
pages in headless Chromium: chromium_proc.py) in the receiver's namespace. Used by
test_turn_daemon.py (the quick aiortc row) and IntegrationTests/castkit/faults/turn.py (the full-set rows).

Every address lives in the namespaces TurnWorld makes; the stack listens on 0.0.0.0 there
(203.0.113.1/.5 and 198.51.100.1), and both sides reach it through their own NAT.
"""
from __future__ import annotations

import asyncio
import os
import pathlib
import re
import subprocess
import time

from castkit.paths import DEVSTACK
from castkit.rxproc import ReceiverProc, wait_frames
from castkit.turn_world import TURN_IP, TURN_PORT, TURN_URL, TurnWorld


class Stack:
    """A devstack inside the public namespace (`ip netns exec`); its services live there."""

    def __init__(self, world: TurnWorld, out: pathlib.Path, turn_urls: list[str] | None = None,
                 credential_ttl: int | None = None):
        self.world, self.out = world, out
        # What ice-config lists (comma-separated to devstack): UDP by default; `?transport=tcp`
        # and `turns:` for the stream rows (turns: needs TurnWorld(tls=True)).
        self.turn_urls = turn_urls or [TURN_URL]
        self.credential_ttl = credential_ttl     # of ice-config's TURN credentials (devstack's default: a day)
        self.env: dict = {}
        self.state_dir = ""

    def up(self) -> "Stack":
        import tempfile
        from castkit.devstack import parse_env
        self.state_dir = tempfile.mkdtemp(prefix="castd-turnstack-")
        os.chmod(self.state_dir, 0o755)       # the postgres user must reach its data directory
        args = [str(DEVSTACK), "up", "--state-dir", self.state_dir, "--port", "54321",
                "--pg-port", "54322", "--stun-port", "3479", "--listen", "0.0.0.0",
                "--turn", ",".join(self.turn_urls), "--turn-secret", self.world.secret]
        if self.credential_ttl is not None:
            args += ["--turn-credential-ttl", str(self.credential_ttl)]
        r = subprocess.run(self.world.exec("pub", *args), capture_output=True, text=True, timeout=180)
        if r.returncode != 0:
            raise RuntimeError(f"devstack up in the public namespace failed:\n{r.stderr[-2000:]}")
        self.env = parse_env(r.stdout)
        return self

    @property
    def port(self) -> int:
        return int(self.env["CASTD_API_URL"].rsplit(":", 1)[1])

    @property
    def url(self) -> str:
        """The stack as both private sides reach it: through their NAT to the public namespace."""
        return f"http://{TURN_IP}:{self.port}"

    @property
    def key(self) -> str:
        return self.env["CASTD_SUPABASE_KEY"]

    def down(self) -> None:
        if self.state_dir:
            gw = pathlib.Path(self.state_dir) / "gateway.log"
            if gw.exists() and self.out.exists():
                (self.out / "gateway.log").write_bytes(gw.read_bytes())
            subprocess.run([str(DEVSTACK), "down", "--state-dir", self.state_dir],
                           capture_output=True, text=True, timeout=60)
            subprocess.run(["rm", "-rf", self.state_dir])


async def start_receiver(world: TurnWorld, stack: Stack, log: pathlib.Path, chromium: bool = False,
                         relay_only: bool = False, ns: str = "r", twcc: bool = False):
    """receiver_proc.py (aiortc, coturn as its STUN server; with `twcc` it sends transport-cc
    feedback and no REMB, like Chromium) or chromium_proc.py (the pages, with the stack's
    ice-config: TURN too) in the receiver's namespace."""
    env = None
    if chromium:
        from castkit.confine import CONFINED_ENV, confined_env_value
        # The pages' config.js names 127.0.0.1:<port>: chromium_proc forwards it to the stack.
        cfg = {"api_url": f"http://127.0.0.1:{stack.port}", "forward_to": TURN_IP,
               "stack_ice": True, "relay_only": relay_only}
        # The namespace is the confinement: no route off the machine from it.
        env = dict(os.environ, **{CONFINED_ENV: confined_env_value(world.ns[ns])})
    else:
        cfg = {"api_url": stack.url, "supabase_url": stack.url, "key": stack.key,
               "ice_servers": [{"urls": f"stun:{TURN_IP}:{TURN_PORT}"}], "twcc": twcc}
    return await ReceiverProc.spawn(world.exec(ns), cfg, log, chromium=chromium, env=env)


class TurnCast:
    """One session through the relay: receiver, `castd pair`, `castd --session` (in castd's namespace)."""

    def __init__(self, world: TurnWorld, stack: Stack, display: str, out: pathlib.Path, *,
                 chromium: bool = False, relay_only: bool = False, castd_ns: str = "c", receiver_ns: str = "r",
                 twcc: bool = False):
        self.world, self.stack, self.display, self.out = world, stack, display, out
        self.chromium, self.relay_only, self.twcc = chromium, relay_only, twcc
        self.castd_ns, self.receiver_ns = castd_ns, receiver_ns
        out.mkdir(parents=True, exist_ok=True)
        self.rx = None
        self.daemon = None
        self.session_id = ""
        self.secrets: set[str] = set()

    def _castd(self, *args: str) -> list[str]:
        from castkit.castd_proc import castd_binary
        return self.world.exec(self.castd_ns, castd_binary(), *args)

    def _env(self) -> dict:
        env = dict(os.environ, CASTD_API_URL=self.stack.url, CASTD_SUPABASE_URL=self.stack.url,
                   CASTD_SUPABASE_KEY=self.stack.key, XDG_STATE_HOME=str(self.out / "state"), DISPLAY=self.display)
        env.pop("JOURNAL_STREAM", None)
        if self.world.tls:
            # coturn's certificate chains to the test CA: trusted only through the development flag.
            env["CASTD_DEV_TRUST_CERTIFICATE"] = str(self.world.ca_path)
        return env

    async def start(self, prefs: dict | None = None) -> "TurnCast":
        from castkit.castd_proc import Daemon
        await self.pair(prefs)
        p = await asyncio.create_subprocess_exec(*self._castd("--session", self.session_id, "--log-level", "debug"),
                                                 env=self._env(), stdout=asyncio.subprocess.PIPE,
                                                 stderr=asyncio.subprocess.PIPE)
        self.daemon = Daemon(p)
        return self

    async def pair(self, prefs: dict | None = None) -> None:
        """The receiver, a session, and `castd pair` approved: castd's identity is stored."""
        self.rx = await start_receiver(self.world, self.stack, self.out / "receiver.log", self.chromium,
                                       self.relay_only, self.receiver_ns, self.twcc)
        s = await self.rx.cmd(cmd="create")
        if "error" in s:
            raise RuntimeError(f"receiver: {s}")
        self.session_id = s["sessionId"]
        self.secrets.add(s["pin"])
        pair = await asyncio.create_subprocess_exec(*self._castd("pair", "--pin", s["pin"], "--json"), env=self._env(),
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        ok = await self.rx.cmd(cmd="approve", prefs=prefs or {"autoQuality": True, "resolution": "1080p", "frameRate": 30})
        out, err = await asyncio.wait_for(pair.communicate(), 60)
        (self.out / "pair.log").write_bytes(out + err)
        if pair.returncode != 0 or "error" in ok:
            raise RuntimeError(f"pairing failed ({pair.returncode}): {ok} {err.decode()[-500:]}")

    async def doctor_turn(self) -> tuple[int, dict, str]:
        """`castd doctor --turn --json` as the paired sender: the TURN servers of the stack's ice-config."""
        import json
        p = await asyncio.create_subprocess_exec(*self._castd("doctor", "--turn", "--json"), env=self._env(),
                                                 stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(p.communicate(), 60)
        return p.returncode, (json.loads(out) if out.strip() else {}), err.decode()

    async def report(self) -> dict:
        return await self.rx.cmd(cmd="report")

    async def wait_frames(self, n: int, timeout: float, since: float | None = None) -> float:
        """Until n frames arrived after `since` (monotonic); when the first of them came."""
        return await wait_frames(self, n, timeout, since)

    def selected_pairs(self) -> list[dict]:
        """castd's `selected_pair` lines as {field: value}."""
        return [dict(re.findall(r"(\w+)=(\S+)", l)) for l in self.daemon.stderr_lines if "selected_pair" in l]

    def lines(self, text: str) -> list[str]:
        return [l for l in self.daemon.stderr_lines if text in l]

    async def stop(self) -> int | None:
        rc = None
        if self.daemon:
            if self.daemon.proc.returncode is None:
                self.daemon.proc.terminate()
                try:
                    await asyncio.wait_for(self.daemon.proc.wait(), 10)
                except asyncio.TimeoutError:
                    await self.daemon.kill()
            rc = self.daemon.proc.returncode
            await asyncio.sleep(0.2)          # the reader task drains the last lines
            (self.out / "castd.log").write_text("\n".join(self.daemon.stderr_lines) + "\n")
        if self.rx:
            await self.rx.close()
        return rc

