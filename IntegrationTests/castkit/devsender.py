"""castd dev-send driven from Python: JSON lines over its stdin and stdout."""

import asyncio
import contextlib
import json
import pathlib
from typing import Any, Callable

import numpy as np
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.sdp import candidate_from_sdp

from castkit.castd_build import binary


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


# SMPTE bars (top two thirds), left to right: white(75%), yellow, cyan, green, magenta, red, blue.
BARS = [(191, 191, 191), (191, 191, 0), (0, 191, 191), (0, 191, 0), (191, 0, 191), (191, 0, 0), (0, 0, 191)]


def bar_colours(frame: np.ndarray) -> list[tuple[int, int, int]]:
    h, w, _ = frame.shape
    out = []
    for i in range(7):
        x0 = int((i + 0.3) * w / 7)
        x1 = int((i + 0.7) * w / 7)
        patch = frame[int(h * 0.2):int(h * 0.5), x0:x1]
        out.append(tuple(int(v) for v in patch.reshape(-1, 3).mean(axis=0)))
    return out


def assert_sent_cleanly(sender: DevSender, rc: int, frames: int) -> dict:
    """dev-send exited 0 having sent `frames` frames without an SRTP error; its last stats."""
    stats = sender.stats()
    assert rc == 0
    assert stats["framesSent"] >= frames
    assert stats["srtpErrors"] == 0
    return stats


async def aiortc_answers(sender: DevSender, take: Callable[[Any, Any], bool], pc: RTCPeerConnection | None = None,
                         gather_in=contextlib.nullcontext, wait_s: float = 30,
                         edit_answer: Callable[[str], str] = lambda sdp: sdp) -> RTCPeerConnection:
    """aiortc answers castd's offer (through `edit_answer`, e.g. to reject a stream) and hands
    every decoded frame to `take(track, frame)` until it returns True (a timeout after wait_s).
    `gather_in()` is entered while aiortc makes its sockets (setLocalDescription gathers),
    e.g. another network namespace. The peer connection stays open: the caller closes it."""
    pc = pc or RTCPeerConnection()
    enough = asyncio.Event()

    @pc.on("track")
    def on_track(track):
        async def pull():
            while True:
                try:
                    f = await track.recv()
                except Exception:
                    return
                if take(track, f):
                    enough.set()
        asyncio.ensure_future(pull())

    offer = await sender.next("offer", timeout=15)
    with gather_in():
        await pc.setRemoteDescription(RTCSessionDescription(sdp=offer["sdp"], type="offer"))
        await pc.setLocalDescription(await pc.createAnswer())
    await sender.send(type="answer", sdp=edit_answer(pc.localDescription.sdp))

    fwd = asyncio.create_task(sender.forward_candidates(pc))
    try:
        await asyncio.wait_for(enough.wait(), wait_s)
    finally:
        fwd.cancel()
    return pc


async def answer_with_aiortc(sender: DevSender, frames_wanted: int, pc: RTCPeerConnection | None = None,
                             gather_in=contextlib.nullcontext, wait_s: float = 30):
    """aiortc answers castd's offer and decodes `frames_wanted` video frames (as RGB arrays)."""
    frames: list[np.ndarray] = []

    def take(track, f) -> bool:
        frames.append(f.to_ndarray(format="rgb24"))
        return len(frames) >= frames_wanted

    pc = await aiortc_answers(sender, take, pc, gather_in, wait_s)
    return pc, frames
