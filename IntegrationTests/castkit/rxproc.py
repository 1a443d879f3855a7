"""The parent's side of the receiver processes: receiver_proc.py (aiortc) or, with
chromium=True, chromium_proc.py (the receiver pages in headless Chromium), started inside a
network namespace and driven by JSON lines on their stdin and stdout. Scripts/faults (castkit.faults)
and the TURN casts (turn_cast.py) use it."""
from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from castkit.paths import CASTKIT, PYTHON


class ReceiverProc:
    def __init__(self, proc: asyncio.subprocess.Process, log: Path):
        self.proc, self.log = proc, log

    @classmethod
    async def spawn(cls, prefix: list[str], cfg: dict, log: Path, chromium: bool = False,
                    env: dict | None = None, script: Path | None = None, limit: int = 1 << 24) -> "ReceiverProc":
        """Start the receiver process under `prefix` (e.g. ["ip", "netns", "exec", ns]) with its
        configuration `cfg`; its stderr is appended to `log`. `script`: another process that
        speaks JSON lines the same way (default receiver_proc.py, or chromium_proc.py);
        `limit`: the longest answer line, bytes."""
        script = script or CASTKIT / ("chromium_proc.py" if chromium else "receiver_proc.py")
        errf = open(log, "ab")
        p = await asyncio.create_subprocess_exec(
            *prefix, PYTHON, str(script), json.dumps(cfg), env=env,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=errf, limit=limit)
        errf.close()
        return cls(p, log)

    async def cmd(self, timeout: float = 60, **msg) -> dict:
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        await self.proc.stdin.drain()
        line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not line:
            raise RuntimeError(f"receiver process ended (see {self.log})")
        return json.loads(line)

    async def call(self, timeout: float = 60, **msg) -> dict:
        """cmd, with an answer of {"error"} (and the pages' "console", if any) raised as a RuntimeError."""
        got = await self.cmd(timeout, **msg)
        if "error" in got:
            raise RuntimeError(f"receiver: {got['error']} {got.get('console', '')}".rstrip())
        return got

    async def close(self, timeout: float = 10) -> None:
        if self.proc.returncode is None:
            try:
                self.proc.stdin.write(b'{"cmd":"quit"}\n')
                await asyncio.wait_for(self.proc.wait(), timeout)
            except (asyncio.TimeoutError, ConnectionError):
                self.proc.kill()
                await self.proc.wait()


async def wait_frames(cast, n: int, timeout: float, since: float | None = None) -> float:
    """Wait until n frames arrived after `since` (monotonic); returns when the first of them came.
    `cast` has `report()` (the receiver's report) and `daemon` (castd as a castd_proc.Daemon)."""
    deadline = time.monotonic() + timeout
    while True:
        rep = await cast.report()
        fr = [t for t in rep["frames"] if since is None or t > since]
        if len(fr) >= n:
            return fr[0]
        if cast.daemon.proc.returncode is not None:
            raise RuntimeError(f"castd exited ({cast.daemon.proc.returncode}) while waiting for frames")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(fr)} of {n} frames within {timeout} s")
        await asyncio.sleep(0.5)
