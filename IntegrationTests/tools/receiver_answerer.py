"""An aiortc answerer that plays the receiver and decodes frames to numpy arrays.

For tests that need exact pixels rather than a browser: it follows the
receiver side of spec §6/§7/§11 (answer each offer with a new negotiationId on
a new peer connection, same negotiationId in the answer, trickled candidates
then endOfCandidates, early candidates buffered, other negotiationIds ignored)
and keeps every decoded video frame's arrival time, size and frame counter.

    rx = ReceiverAnswerer(receiver_client, session_id, keep_frames=5)
    await rx.start()
    await rx.wait_frames(30)
    rgb = rx.last_frame            # numpy (h, w, 3) uint8
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import numpy as np
from aiortc import MediaStreamTrack, RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools.signaling import SessionSignals, StackClient  # noqa: E402
from tools.trickle import add_remote_candidate, split_candidates  # noqa: E402


@dataclass
class FrameInfo:
    arrived: float      # time.monotonic() when decoded
    width: int
    height: int
    negotiation_id: str


class ReceiverAnswerer:
    def __init__(self, client: StackClient, session_id: str, *, keep_frames: int = 3,
                 on_frame=None):
        self.client = client
        self.session_id = session_id
        self.keep_frames = keep_frames
        self.on_frame = on_frame  # optional fn(rgb ndarray, FrameInfo)
        self.signals = SessionSignals(client, session_id, "receiver")
        self.pc: RTCPeerConnection | None = None
        self.negotiation_id: str | None = None
        self.remote_set = False
        self.pending: dict[str, list[dict]] = {}
        self.answered: set[str] = set()
        self.frames: list[FrameInfo] = []
        self.recent: list[np.ndarray] = []
        self.codecs: list[str] = []
        self.connection_states: list[str] = []
        self.disconnect_reason: str | None = None
        self.frame_event = asyncio.Event()
        self._rows: asyncio.Queue = asyncio.Queue()
        self._tasks: list[asyncio.Task] = []

    @property
    def last_frame(self) -> np.ndarray | None:
        return self.recent[-1] if self.recent else None

    async def start(self) -> None:
        self.signals.on_row(self._rows.put_nowait)
        await self.signals.start()
        self._tasks.append(asyncio.create_task(self._loop()))

    async def _loop(self) -> None:
        while True:
            row = await self._rows.get()
            p = row.get("payload") or {}
            t = row.get("message_type")
            if t == "offer" and p.get("negotiationId") not in self.answered:
                await self._answer(p)
            elif t == "ice_candidate":
                nid = p.get("negotiationId")
                if nid == self.negotiation_id and self.remote_set:
                    await add_remote_candidate(self.pc, p)
                elif nid not in self.answered:
                    self.pending.setdefault(nid, []).append(p)
            elif t == "disconnect":
                self.disconnect_reason = p.get("reason", "")
                await self._close_pc()

    async def _answer(self, offer: dict) -> None:
        nid = offer["negotiationId"]
        self.answered.add(nid)
        await self._close_pc()
        self.negotiation_id = nid
        self.remote_set = False
        pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        self.pc = pc

        @pc.on("track")
        def on_track(track: MediaStreamTrack):
            if track.kind == "video":
                self._tasks.append(asyncio.create_task(self._consume(track, nid)))

        @pc.on("connectionstatechange")
        def on_state():
            self.connection_states.append(pc.connectionState)

        await pc.setRemoteDescription(RTCSessionDescription(sdp=offer["sdp"], type="offer"))
        for t in pc.getTransceivers():
            t.direction = "recvonly"
        self.remote_set = True
        for c in self.pending.pop(nid, []):
            await add_remote_candidate(pc, c)
        answer = await pc.createAnswer()
        await pc.setLocalDescription(answer)
        sdp, cands = split_candidates(pc.localDescription.sdp)
        for line in sdp.splitlines():
            if line.startswith("a=rtpmap:"):
                self.codecs.append(line.split(" ", 1)[1])
                break
        await self.signals.send("answer", {"type": "answer", "sdp": sdp, "negotiationId": nid})
        for c in cands:
            await self.signals.send("ice_candidate", {"negotiationId": nid, **c})
        await self.signals.send("ice_candidate", {"negotiationId": nid, "endOfCandidates": True})

    async def _consume(self, track: MediaStreamTrack, nid: str) -> None:
        try:
            while True:
                frame = await track.recv()
                rgb = frame.to_ndarray(format="rgb24")
                info = FrameInfo(time.monotonic(), frame.width, frame.height, nid)
                self.frames.append(info)
                self.recent.append(rgb)
                del self.recent[: -self.keep_frames]
                if self.on_frame:
                    self.on_frame(rgb, info)
                self.frame_event.set()
        except MediaStreamError:
            return

    async def wait_frames(self, n: int, timeout: float = 20.0) -> None:
        async def until():
            while len(self.frames) < n:
                self.frame_event.clear()
                await self.frame_event.wait()
        await asyncio.wait_for(until(), timeout)

    async def _close_pc(self) -> None:
        if self.pc is not None:
            pc, self.pc = self.pc, None
            await pc.close()

    async def close(self) -> None:
        for t in self._tasks:
            t.cancel()
        await self._close_pc()
        await self.signals.close()
