"""castd as a subprocess against the local stack: pairing and the daemon."""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pathlib
import signal
import time

from castkit import castd_log
from castkit.castd_build import binary
from castkit.signaling import StackClient, StackConfig


def castd_binary() -> str:
    return binary("castd")


def castd_env(stack, state_home: pathlib.Path, **extra) -> dict:
    env = dict(os.environ)
    env.update({"CASTD_API_URL": stack.api_url, "CASTD_SUPABASE_URL": stack.supabase_url,
                "CASTD_SUPABASE_KEY": stack.key, "XDG_STATE_HOME": str(state_home)})
    env.pop("JOURNAL_STREAM", None)
    env.update(extra)
    return env


async def run_castd(env: dict, *args: str, timeout: float = 60) -> tuple[int, str, str]:
    p = await asyncio.create_subprocess_exec(castd_binary(), *args, env=env, stdout=asyncio.subprocess.PIPE,
                                             stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(p.communicate(), timeout)
    return p.returncode, out.decode(), err.decode()


class Receiver:
    """The receiver side, driven by the test: creates the session, approves or denies."""

    def __init__(self, stack):
        self.client = StackClient(StackConfig(stack.api_url, stack.supabase_url, stack.key))
        self.session: dict = {}

    async def create(self) -> dict:
        await self.client.sign_in()
        self.session = await self.client.api("session-create", {})
        return self.session

    async def wait_pairing_then(self, approve: bool, prefs: dict | None = None, timeout: float = 20) -> dict:
        sid = self.session["sessionId"]

        async def pairing():
            while True:
                rows = [r for r in await self.client.select(sid, "receiver") if r["message_type"] == "join_request"]
                if rows:
                    return rows[0]
                await asyncio.sleep(0.2)
        req = await asyncio.wait_for(pairing(), timeout)
        body = {"sessionId": sid, "approve": approve}
        if prefs:
            body["streamPrefs"] = prefs
        await self.client.api("session-approve", body)
        return req


async def pair(stack, state_home, *, approve=True, prefs=None, extra_args=()) -> tuple[Receiver, int, list[dict], str]:
    """castd pair --pin … --json against a receiver that approves (or denies)."""
    rx = Receiver(stack)
    s = await rx.create()
    env = castd_env(stack, state_home)
    task = asyncio.create_task(run_castd(env, "pair", "--pin", s["pin"], "--json", *extra_args))
    await rx.wait_pairing_then(approve, prefs)
    rc, out, err = await task
    events = [json.loads(l) for l in out.splitlines() if l.strip()]
    return rx, rc, events, out + err


class Daemon:
    def __init__(self, proc: asyncio.subprocess.Process):
        self.proc = proc
        self.stderr_lines: list[str] = []
        self.stderr_times: list[float] = []   # time.monotonic() when each line arrived
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, env: dict, session_id: str, *extra: str) -> "Daemon":
        p = await asyncio.create_subprocess_exec(castd_binary(), "--session", session_id, "--log-level", "debug",
                                                 *extra, env=env, stdout=asyncio.subprocess.PIPE,
                                                 stderr=asyncio.subprocess.PIPE)
        return cls(p)

    async def _read(self):
        while True:
            line = await self.proc.stderr.readline()
            if not line:
                return
            self.stderr_times.append(time.monotonic())
            self.stderr_lines.append(line.decode().rstrip("\n"))

    def log_has(self, text: str) -> bool:
        return any(text in l for l in self.stderr_lines)

    async def wait_log(self, text: str, timeout: float = 20):
        async def until():
            while not self.log_has(text):
                if self.proc.returncode is not None:
                    raise AssertionError(f"castd exited ({self.proc.returncode}) before '{text}':\n" + "\n".join(self.stderr_lines[-30:]))
                await asyncio.sleep(0.05)
        await asyncio.wait_for(until(), timeout)

    def events(self, event: str | None = None, **match) -> list[dict]:
        """castd's log events so far, parsed (castkit.castd_log), of `event` with fields equal to `match`."""
        return castd_log.events(self.stderr_lines, event, **match)

    async def wait_event(self, event: str, timeout: float = 20, **match) -> dict:
        """Waits for the first log event `event` whose fields equal `match`; returns its fields."""
        return (await self.wait_for(lambda: self.events(event, **match), f"event={event} {match}", timeout))[0]

    async def wait_for(self, find, what: str, timeout: float, every: float = 0.05):
        """Polls `find()` until it returns something truthy, which it returns; fails at once if
        castd exits first (with its last lines), and after `timeout` seconds."""
        async def until():
            while not (found := find()):
                if self.proc.returncode is not None:
                    raise AssertionError(f"castd exited ({self.proc.returncode}) before {what}:\n"
                                         + "\n".join(self.stderr_lines[-30:]))
                await asyncio.sleep(every)
            return found
        return await asyncio.wait_for(until(), timeout)

    def signal(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)

    async def wait(self, timeout: float = 10) -> tuple[int, str]:
        rc = await asyncio.wait_for(self.proc.wait(), timeout)
        out = (await self.proc.stdout.read()).decode()
        await asyncio.wait_for(self._reader, 5)
        return rc, out

    async def kill(self):
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


@contextlib.asynccontextmanager
async def answered_cast(stack, state_home, env: dict, *daemon_args: str, keep_frames: int = 2, prefs=None):
    """castd paired (the receiver approving with `prefs`), an aiortc answerer on that session, and
    `castd --session` (with `env`, e.g. the screen's) casting to it. Yields (answerer, daemon);
    kills castd and closes the answerer and the receiver's client after."""
    from castkit.receiver_answerer import ReceiverAnswerer   # aiortc, for the tests that cast only
    rx, rc, _, raw = await pair(stack, state_home, prefs=prefs)
    try:
        assert rc == 0, raw
        answerer = ReceiverAnswerer(rx.client, rx.session["sessionId"], keep_frames=keep_frames)
        await answerer.start()
        try:
            daemon = await Daemon.start(env, rx.session["sessionId"], *daemon_args)
            try:
                yield answerer, daemon
            finally:
                await daemon.kill()
        finally:
            await answerer.close()
    finally:
        await rx.client.close()


async def start_cast(stack, tmp_path, **env_extra):
    """castd paired (approved), an aiortc answerer on the session and `castd --session` started;
    returns (receiver, session id, answerer, daemon) for the caller to stop."""
    from castkit.receiver_answerer import ReceiverAnswerer   # aiortc, for the tests that cast only
    rx, rc, events, raw = await pair(stack, tmp_path)
    assert rc == 0, raw
    sid = rx.session["sessionId"]
    answerer = ReceiverAnswerer(rx.client, sid)
    await answerer.start()
    daemon = await Daemon.start(castd_env(stack, tmp_path, **env_extra), sid)
    return rx, sid, answerer, daemon


@contextlib.asynccontextmanager
async def chromium_cast(stack, tmp_path, *, hide_mdns=False, size=(1280, 720), browser=None, codec=None, screen=None,
                        castd_args=()):
    """An Xvfb screen (or the started `screen`), Chromium (or the started `browser`, e.g. Firefox)
    on the dashboard, `castd pair` approved there, the viewer open (with ?codec= when given) and
    `castd --session` casting to it (with `castd_args` added). Yields (viewer, daemon); stops everything."""
    from castkit.chromium import Chromium
    from castkit.receiver_pages import Dashboard, Viewer
    from castkit.xscreen import XScreen
    daemon = None
    try:
        # Inside the try: a screen that cannot start (castd-pattern not built) must not leave
        # the caller's browser running.
        screen = screen or await XScreen(*size).start()
        browser = browser or await Chromium(hide_mdns=hide_mdns).start()
        dash = await Dashboard.open(browser, stack.dashboard)
        env = castd_env(stack, tmp_path, DISPLAY=screen.display)
        pairing = asyncio.create_task(run_castd(env, "pair", "--pin", dash.pin, "--json"))
        await dash.approve(resolution="1080p", frame_rate=30)
        rc, out, err = await pairing
        assert rc == 0, out + err
        viewer = await Viewer.open(browser, stack.api_url, dash.session_id, codec=codec)
        daemon = await Daemon.start(env, dash.session_id, *castd_args)
        yield viewer, daemon
    finally:
        if daemon:
            await daemon.kill()
        if browser:
            await browser.close()
        if screen:
            screen.stop()
