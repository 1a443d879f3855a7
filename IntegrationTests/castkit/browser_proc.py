"""What the tests' headless browsers share beyond their protocols (castkit/chromium.py over
the DevTools protocol, castkit/firefox.py over WebDriver BiDi).

`BrowserProcess`: a throw-away profile and log file, the browser in a process group of its
own (in the confine Guard's cgroup when run as root outside a test namespace, so packets it
sends off the machine are counted), waiting for the endpoint it announces, and a close that
asks the browser to quit, then ends whatever is left of its process group and removes the
profile. `Connection`: one WebSocket carrying commands by id, each answered through a
future; a subclass reads the browser's answers and events in its protocol's shape.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, TypeVar

from castkit.confine import Guard, confined

T = TypeVar("T")


def _group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is pgid, read from /proc."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        # Fields after the parenthesised command: state ppid pgrp ...
        rest = stat[stat.rindex(")") + 2:].split()
        if int(rest[2]) == pgid and rest[0] != "Z":
            out.append(int(d))
    return out


async def end_process_group(proc: subprocess.Popen) -> None:
    """After asking a browser to close: waits for it, then kills what is left of its process
    group (renderers, GPU, zygote, content processes) and waits until none is alive."""
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    deadline = time.monotonic() + 5
    while _group_members(proc.pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


class Connection:
    """One WebSocket to a browser: a command goes out with a fresh id and its answer (the
    message with that id) resolves its future. Subclasses say what in an answer is an error
    (`error_of`) and take every message without an id (`event`)."""

    error: type[Exception] = RuntimeError
    name = "browser connection"

    def __init__(self, ws):
        self.ws = ws
        self.ids = itertools.count(1)
        self.pending: dict[int, asyncio.Future] = {}
        self.reader = asyncio.create_task(self._read())
        self.closed = False

    def error_of(self, msg: dict) -> Exception | None:
        raise NotImplementedError

    def event(self, msg: dict) -> None:
        pass

    async def _read(self):
        try:
            async for raw in self.ws:
                msg = json.loads(raw)
                if "id" not in msg:
                    self.event(msg)
                    continue
                fut = self.pending.pop(msg["id"], None)
                if fut and not fut.done():
                    err = self.error_of(msg)
                    if err is not None:
                        fut.set_exception(err)
                    else:
                        fut.set_result(msg.get("result", {}))
        except Exception:
            pass
        finally:
            self.closed = True
            for fut in self.pending.values():
                if not fut.done():
                    fut.set_exception(self.error(f"{self.name} closed"))

    async def command(self, msg: dict[str, Any], timeout: float) -> dict:
        """Sends msg (method, params, …) with a fresh id; returns the answer's result."""
        if self.closed:
            raise self.error(f"{self.name} closed")
        mid = next(self.ids)
        fut = asyncio.get_running_loop().create_future()
        self.pending[mid] = fut
        await self.ws.send(json.dumps({"id": mid, **msg}))
        try:
            return await asyncio.wait_for(fut, timeout)
        finally:
            self.pending.pop(mid, None)


class BrowserProcess:
    """A headless browser process; a subclass names it, builds its command line, finds its
    endpoint and asks it to quit. Use as `async with Browser() as b:`.

    `hide_mdns=True` is the browsers' default: host candidates behind `<uuid>.local` names
    announced by multicast DNS on every non-loopback interface, which would leave the machine;
    so it is refused outside a network namespace of the test's own (castkit/confine.py).
    Outside such a namespace, and as root, the browser's processes run in a cgroup that an
    nftables counter watches (castkit/confine.Guard): after `close`, `off_machine` holds how
    many packets they sent through a non-loopback interface."""

    name = "browser"
    error: type[Exception] = RuntimeError

    def __init__(self, *, hide_mdns: bool, startup_timeout: float):
        if hide_mdns and not confined():
            raise RuntimeError(f"{self.name} with mDNS host candidates multicasts onto the real network: "
                               "run it in a network namespace (castkit/confine.py), or use hide_mdns=False")
        self.hide_mdns = hide_mdns
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen | None = None
        self.profile: str | None = None
        self.conn: Connection | None = None
        self._ws = None
        self.log_path: Path | None = None
        self.guard: Guard | None = None
        self.off_machine: int | None = None

    def _spawn(self, argv: Callable[[], list[str]], env: dict[str, str] | None = None,
               prepare: Callable[[], None] | None = None) -> None:
        """A fresh profile (then `prepare()`, e.g. its prefs), the log file, and the browser
        started with `argv()` in a new session (its own process group)."""
        self.profile = tempfile.mkdtemp(prefix=f"castd-{self.name.lower()}-")
        if prepare:
            prepare()
        self.log_path = Path(self.profile).with_suffix(".log")
        if not confined() and os.geteuid() == 0:
            self.guard = Guard()
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(argv(), stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                     start_new_session=True, preexec_fn=self.guard.join if self.guard else None)
        log.close()

    async def _announced(self, look: Callable[[], T | None], what: str) -> T:
        """Polls `look()` until it finds the endpoint the browser announces; a browser that
        exits, or announces nothing within startup_timeout, is an error with its log's tail."""
        deadline = time.monotonic() + self.startup_timeout
        while True:
            found = look()
            if found is not None:
                return found
            assert self.proc
            if self.proc.poll() is not None:
                raise self.error(f"{self.name.lower()} exited with {self.proc.returncode}: {self.log_tail()}")
            if time.monotonic() > deadline:
                await self.close()
                raise self.error(f"{self.name.lower()} {what} in {self.startup_timeout}s: {self.log_tail()}")
            await asyncio.sleep(0.05)

    def log_tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_bytes()[-n:].decode(errors="replace") if self.log_path else ""
        except OSError:
            return ""

    async def _ask_to_quit(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        if self.conn and not self.conn.closed:
            try:
                await self._ask_to_quit()
            except (self.error, asyncio.TimeoutError):
                pass
        if self._ws is not None:
            try:
                await self._ws.close()
            except Exception:
                pass
        if self.conn:
            self.conn.reader.cancel()
        if self.proc:
            # The renderer, GPU, zygote or content children share the group: end them all.
            await end_process_group(self.proc)
        if self.guard:
            self.off_machine = self.guard.counters()["run_any"]
            self.guard.close()
            self.guard = None
        if self.profile:
            shutil.rmtree(self.profile, ignore_errors=True)
            if self.log_path:
                self.log_path.unlink(missing_ok=True)
        self.conn = None

    def assert_stayed_on_the_machine(self) -> None:
        """After close: no packet of the browser left through a non-loopback interface
        (nothing to check when it ran unguarded: not root, or inside a confined run)."""
        assert not self.off_machine, f"{self.name.lower()} sent {self.off_machine} packets off the machine"

    def group_alive(self) -> bool:
        """True while a live (non-zombie) process of the browser's process group exists."""
        if not self.proc:
            return False
        return bool(_group_members(self.proc.pid))

    async def start(self):
        raise NotImplementedError

    async def __aenter__(self):
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.close()
