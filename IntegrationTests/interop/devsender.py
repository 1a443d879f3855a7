"""castd dev-send driven from Python: JSON lines over its stdin and stdout."""

import asyncio
import json
import pathlib


import sys

from aiortc.sdp import candidate_from_sdp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from tools.castd_build import binary  # noqa: E402


def castd_binary() -> str:
    return binary("castd")


class DevSender:
    """castd dev-send as a subprocess speaking JSON lines."""

    def __init__(self, proc: asyncio.subprocess.Process):
        self.proc = proc
        self.lines: asyncio.Queue = asyncio.Queue()
        self.log: list[dict] = []
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, clip: pathlib.Path, *extra: str) -> "DevSender":
        proc = await asyncio.create_subprocess_exec(
            str(castd_binary()), "dev-send", "--h264", str(clip), *extra,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        return cls(proc)

    async def _read(self):
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                await self.lines.put(None)
                return
            msg = json.loads(line)
            self.log.append(msg)
            await self.lines.put(msg)

    async def next(self, type_: str, timeout: float = 10.0) -> dict:
        async def wait():
            while True:
                m = await self.lines.get()
                if m is None:
                    raise AssertionError(f"castd dev-send exited before '{type_}': {self.log[-5:]}")
                if m["type"] == type_:
                    return m
        return await asyncio.wait_for(wait(), timeout)

    async def send(self, **msg):
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        await self.proc.stdin.drain()

    async def stop(self) -> int:
        if self.proc.returncode is None:
            try:
                await self.send(type="stop")
                self.proc.stdin.close()
            except (BrokenPipeError, ConnectionResetError):
                pass
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except asyncio.TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        await asyncio.wait_for(self._reader, 5)
        return self.proc.returncode

    def stats(self) -> dict:
        s = [m for m in self.log if m["type"] == "stats"]
        return s[-1] if s else {}

    async def forward_candidates(self, pc) -> None:
        """Hands every candidate castd trickles to an aiortc peer connection (runs until cancelled)."""
        while True:
            m = await self.next("candidate", timeout=30)
            c = candidate_from_sdp(m["candidate"].split(":", 1)[1])
            c.sdpMid, c.sdpMLineIndex = "0", 0
            await pc.addIceCandidate(c)
