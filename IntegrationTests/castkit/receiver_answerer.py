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

It can also ask the sender for a keyframe the way a receiver does (RTCP PLI, or
FIR, RFC 4585/5104) and records when the first packet of each IDR arrives:

    sent = await rx.send_pli()     # time.monotonic() when it left
    idr = await rx.wait_idr_after(sent)
"""
from __future__ import annotations

import asyncio
import re
import struct
import time
from dataclasses import dataclass, field

import numpy as np
from aiortc import (MediaStreamTrack, RTCConfiguration, RTCIceServer, RTCPeerConnection, RTCRtpReceiver,
                    RTCSessionDescription)
from aiortc.mediastreams import MediaStreamError
from aiortc.rtcpeerconnection import filter_preferred_codecs
from aiortc.rtp import RTCP_PSFB_FIR, RtcpPsfbPacket

from castkit.signaling import SessionSignals, StackClient
from castkit.trickle import add_remote_candidate, split_candidates


def to_rgb(frame) -> np.ndarray:
    """Decoded frame → RGB with the matrix its VUI signals. swscale (PyAV) converts
    with BT.601 whatever the stream says, so BT.709 streams (castd's x264 signals
    BT.709, limited range, and Chrome honours it) are converted here by hand."""
    if frame.format.name != "yuv420p" or int(frame.colorspace or 2) != 1:
        return frame.to_ndarray(format="rgb24")
    h, w = frame.height, frame.width
    yuv = frame.to_ndarray(format="yuv420p")            # (h*3/2, w): Y, then U, then V
    y = yuv[:h].astype(np.float32)
    u = yuv[h:h + h // 4].reshape(h // 2, w // 2).astype(np.float32)
    v = yuv[h + h // 4:].reshape(h // 2, w // 2).astype(np.float32)
    u = u.repeat(2, axis=0).repeat(2, axis=1)[:h, :w] - 128.0
    v = v.repeat(2, axis=0).repeat(2, axis=1)[:h, :w] - 128.0
    y = (y - 16.0) * (255.0 / 219.0)
    cb, cr = u * (255.0 / 224.0), v * (255.0 / 224.0)
    # ITU-R BT.709: Kr = 0.2126, Kb = 0.0722.
    r = y + 1.5748 * cr
    g = y - 0.18732 * cb - 0.46812 * cr
    b = y + 1.8556 * cb
    return np.clip(np.stack([r, g, b], axis=-1) + 0.5, 0, 255).astype(np.uint8)




def starts_idr(payload: bytes) -> bool:
    """True when an H.264 RTP payload (RFC 6184) carries an IDR slice (NAL type 5) or
    the start of one: a single NAL unit, inside a STAP-A, or an FU-A with the S bit."""
    if not payload:
        return False
    t = payload[0] & 0x1F
    if t == 5:
        return True
    if t == 24:                                   # STAP-A: (size, NAL)*
        i = 1
        while i + 3 <= len(payload):
            size = int.from_bytes(payload[i:i + 2], "big")
            if payload[i + 2] & 0x1F == 5:
                return True
            i += 2 + size
        return False
    if t == 28 and len(payload) >= 2:             # FU-A: indicator, header (S E R type)
        return payload[1] & 0x80 != 0 and payload[1] & 0x1F == 5
    return False


@dataclass
class KeyframeLog:
    """RTCP keyframe requests this receiver sent and the IDRs that arrived, in time.monotonic()."""
    requests: list = field(default_factory=list)     # (time, "pli" | "fir" | "aiortc-pli")
    idrs: list = field(default_factory=list)         # (time of the access unit's first packet, RTP timestamp)
    first_packet: dict = field(default_factory=dict)  # RTP timestamp -> arrival of its first packet


@dataclass
class FrameInfo:
    arrived: float      # time.monotonic() when decoded
    width: int
    height: int
    negotiation_id: str


class ReceiverAnswerer:
    def __init__(self, client: StackClient, session_id: str, *, keep_frames: int = 3,
                 on_frame=None, ice_servers: list[dict] | None = None, codec: str | None = None):
        self.client = client
        self.codec = codec        # "vp8" / "h264": answer with that video codec only (setCodecPreferences)
        self.ice_servers = ice_servers or []      # [{"urls": …}], e.g. a STUN server behind a NAT
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
        # Decoded frames, converted to RGB only when read (converting every 1080p
        # frame in Python would make the receiver, not the sender, the bottleneck).
        self.recent_frames: list = []
        self.codecs: list[str] = []
        self.connection_states: list[str] = []
        self.disconnect_reason: str | None = None
        self.frame_event = asyncio.Event()
        self.keyframes = KeyframeLog()
        self.idr_event = asyncio.Event()
        self.receiver = None          # the video RTCRtpReceiver of the current peer connection
        self.media_ssrc: int | None = None
        self._h264_pts: set[int] = set()
        self._fir_seq = 0
        self._rows: asyncio.Queue = asyncio.Queue()
        self._tasks: list[asyncio.Task] = []

    @property
    def last_frame(self) -> np.ndarray | None:
        return to_rgb(self.recent_frames[-1]) if self.recent_frames else None

    @property
    def recent(self) -> list[np.ndarray]:
        return [to_rgb(f) for f in self.recent_frames]

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
        pc = RTCPeerConnection(RTCConfiguration(iceServers=[RTCIceServer(**x) for x in self.ice_servers]))
        self.pc = pc

        @pc.on("track")
        def on_track(track: MediaStreamTrack):
            if track.kind == "video":
                self._tasks.append(asyncio.create_task(self._consume(track, nid)))
            elif track.kind == "audio":
                self._on_audio_track(track)

        @pc.on("connectionstatechange")
        def on_state():
            self.connection_states.append(pc.connectionState)

        await pc.setRemoteDescription(RTCSessionDescription(sdp=offer["sdp"], type="offer"))
        for t in pc.getTransceivers():
            t.direction = "recvonly"
            if self.codec and t.kind == "video":
                caps = RTCRtpReceiver.getCapabilities("video").codecs
                t.setCodecPreferences([c for c in caps if c.mimeType.lower() in (f"video/{self.codec}", "video/rtx")])
                # aiortc chose the codecs of an offer's transceiver in setRemoteDescription, before
                # the transceiver existed for us to set preferences on: apply them to that choice.
                t._codecs = filter_preferred_codecs(t._codecs, t._preferred_codecs)
        self.remote_set = True
        for c in self.pending.pop(nid, []):
            await add_remote_candidate(pc, c)
        answer = await pc.createAnswer()
        await pc.setLocalDescription(answer)
        sdp, cands = split_candidates(pc.localDescription.sdp)
        self._watch_keyframes(pc, sdp)
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
                info = FrameInfo(time.monotonic(), frame.width, frame.height, nid)
                self.frames.append(info)
                self.recent_frames.append(frame)
                del self.recent_frames[: -self.keep_frames]
                if self.on_frame:
                    self.on_frame(to_rgb(frame), info)
                self.frame_event.set()
        except MediaStreamError:
            return

    def _on_audio_track(self, track: MediaStreamTrack) -> None:
        """An audio track was negotiated: left unread here (a subclass may consume it)."""

    def _watch_keyframes(self, pc: RTCPeerConnection, answer_sdp: str) -> None:
        """Taps the video receiver: every RTP packet of the negotiated H.264 payload
        types is looked at for an IDR, and aiortc's own PLIs are logged too. The media
        SSRC (for PLI and FIR) is taken from H.264 or VP8 packets, not RTX."""
        self._h264_pts = {int(pt) for pt in re.findall(r"a=rtpmap:(\d+) H264/90000", answer_sdp)}
        media_pts = self._h264_pts | {int(pt) for pt in re.findall(r"a=rtpmap:(\d+) VP8/90000", answer_sdp)}
        receiver = next((t.receiver for t in pc.getTransceivers() if t.kind == "video"), None)
        if receiver is None:
            return
        self.receiver = receiver
        handle = receiver._handle_rtp_packet
        send_pli = receiver._send_rtcp_pli
        log = self.keyframes

        async def tap(packet, arrival_time_ms):
            if packet.payload_type in media_pts:
                self.media_ssrc = packet.ssrc
            if packet.payload_type in self._h264_pts:
                now = time.monotonic()
                first = log.first_packet.setdefault(packet.timestamp, now)
                if len(log.first_packet) > 256:
                    for ts in list(log.first_packet)[:128]:
                        del log.first_packet[ts]
                if starts_idr(packet.payload) and not any(ts == packet.timestamp for _, ts in log.idrs[-4:]):
                    log.idrs.append((first, packet.timestamp))
                    self.idr_event.set()
            await handle(packet, arrival_time_ms=arrival_time_ms)

        async def own_pli(media_ssrc):
            log.requests.append((time.monotonic(), "aiortc-pli"))
            await send_pli(media_ssrc)

        receiver._handle_rtp_packet = tap
        receiver._send_rtcp_pli = own_pli
        self._send_pli = send_pli

    def _rtcp_ssrc(self) -> int | None:
        return getattr(self.receiver, "_RTCRtpReceiver__rtcp_ssrc", None)

    async def send_pli(self) -> float:
        """Sends one RTCP PLI (RFC 4585 §6.3.1) for the sender's video SSRC; returns when it left."""
        assert self.receiver is not None and self.media_ssrc is not None, "no video yet"
        t = time.monotonic()
        self.keyframes.requests.append((t, "pli"))
        await self._send_pli(self.media_ssrc)
        return t

    async def send_fir(self) -> float:
        """Sends one RTCP FIR (RFC 5104 §4.3.1) with a new sequence number; returns when it left."""
        assert self.receiver is not None and self.media_ssrc is not None, "no video yet"
        self._fir_seq = (self._fir_seq + 1) % 256
        fci = struct.pack("!IB3x", self.media_ssrc, self._fir_seq)
        packet = RtcpPsfbPacket(fmt=RTCP_PSFB_FIR, ssrc=self._rtcp_ssrc() or 0, media_ssrc=0, fci=fci)
        t = time.monotonic()
        self.keyframes.requests.append((t, "fir"))
        await self.receiver._send_rtcp(packet)
        return t

    def idrs_after(self, t: float) -> list[float]:
        return [at for at, _ in self.keyframes.idrs if at >= t]

    async def wait_idr_after(self, t: float, timeout: float = 5.0) -> float:
        """The arrival time of the first packet of the first IDR that started at or after t."""
        async def until():
            while not self.idrs_after(t):
                self.idr_event.clear()
                await self.idr_event.wait()
            return self.idrs_after(t)[0]
        return await asyncio.wait_for(until(), timeout)

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
