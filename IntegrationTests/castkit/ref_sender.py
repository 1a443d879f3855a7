"""A reference sender in aiortc that follows the contract as castd must.

spec §2 anonymous sign-in · §4 session-pair by PIN (or §3 QR link) ·
§5 subscribe, then backfill, wait for join_approved (denied → disconnect) ·
§6/§8 offer with a fresh negotiationId, candidates trickled one row each, then
endOfCandidates; the matching answer applied, early candidates buffered, rows
of other negotiationIds ignored · §7 H.264 Constrained Baseline (42e01f,
packetization-mode=1) first, VP8 as fallback · §9 session-update connected,
disconnect + end on stop · §10 heartbeat every 30 s · §11 failed or
disconnected > 5 s → new negotiation after 1 s, 3 s, 7 s, at most 3 attempts.

It streams the ColourBars pattern (castkit/pattern.py) so receivers can check
colours and frame numbers. Usable as a library (RefSender) or a command:

    CASTD_API_URL=… CASTD_SUPABASE_URL=… CASTD_SUPABASE_KEY=… \\
        python IntegrationTests/castkit/ref_sender.py --pin 482913 --width 1280 --height 720
"""
from __future__ import annotations

import argparse
import asyncio
import fractions
import logging
import signal
import sys
import time
from urllib.parse import parse_qs, urlparse

import av
from aiortc import (AudioStreamTrack, RTCConfiguration, RTCIceServer, RTCPeerConnection, RTCRtpSender,
                    RTCSessionDescription, VideoStreamTrack)

from castkit.pattern import ColourBars
from castkit.signaling import ApiError, SessionSignals, StackClient, StackConfig, new_negotiation_id
from castkit.trickle import add_remote_candidate, split_candidates

log = logging.getLogger("ref_sender")

RECONNECT_BACKOFF_S = (1.0, 3.0, 7.0)  # spec §11
DISCONNECTED_LIMIT_S = 5.0              # spec §11
HEARTBEAT_S = 30.0                      # spec §10


class PatternTrack(VideoStreamTrack):
    """ColourBars frames at a fixed rate, 90 kHz timestamps."""

    def __init__(self, width: int, height: int, fps: float):
        super().__init__()
        self.pattern = ColourBars(width, height)
        self.fps = fps
        self.count = 0
        self.t0: float | None = None

    async def recv(self) -> av.VideoFrame:
        if self.t0 is None:
            self.t0 = time.monotonic()
        due = self.t0 + self.count / self.fps
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        frame = av.VideoFrame.from_ndarray(self.pattern.frame(self.count), format="rgb24")
        frame.pts = int(self.count * 90000 / self.fps)
        frame.time_base = fractions.Fraction(1, 90000)
        self.count += 1
        return frame


class Denied(Exception):
    pass


class RefSender:
    def __init__(self, client: StackClient, *, width: int = 1280, height: int = 720, fps: float = 30,
                 ice_servers: list[dict] | None = None, device_name: str = "Reference sender",
                 heartbeat_s: float = HEARTBEAT_S, h264: bool = True, audio: bool = False):
        self.client = client
        self.width, self.height, self.fps = width, height, fps
        self.ice_servers = ice_servers  # None: use ice-config; []: none (loopback tests)
        self.device_name = device_name
        self.heartbeat_s = heartbeat_s
        self.h264 = h264
        self.audio = audio  # spec §7: an optional send-only audio track (silence), same stream
        self.session_id: str | None = None
        self.signals: SessionSignals | None = None
        self.pc: RTCPeerConnection | None = None
        self.track: PatternTrack | None = None
        self.negotiation_id: str | None = None
        self.remote_set = False
        self.pending: list[dict] = []
        self.attempts = 0
        self.state = "new"
        self.events: list[tuple[float, str, dict]] = []
        self.ended = asyncio.Event()
        self.connected = asyncio.Event()
        self.end_reason: str | None = None
        self.offer_sdp: str | None = None
        self.sent_candidates = 0
        self._rows: asyncio.Queue = asyncio.Queue()
        self._tasks: list[asyncio.Task] = []
        self._reported_connected = False
        self._disconnected_timer: asyncio.Task | None = None
        self._reconnecting = False

    def event(self, name: str, **fields) -> None:
        self.events.append((time.monotonic(), name, fields))
        log.info("%s %s", name, " ".join(f"{k}={v}" for k, v in fields.items()))

    # ---- pairing ------------------------------------------------------------

    async def pair(self, pin: str | None = None, qr_url: str | None = None) -> str:
        body: dict = {"deviceName": self.device_name}
        if qr_url:
            q = parse_qs(urlparse(qr_url).query)
            body |= {"token": q["t"][0], "sessionId": q["s"][0]}
        else:
            body["pin"] = pin
        res = await self.client.api("session-pair", body)
        self.session_id = res["sessionId"]
        self.state = "pairing"
        self.event("paired", session=self.session_id)
        # spec §5: subscribe first, then backfill.
        self.signals = SessionSignals(self.client, self.session_id, "sender")
        self.signals.on_row(self._rows.put_nowait)
        await self.signals.start()
        self._tasks.append(asyncio.create_task(self._row_loop()))
        self._tasks.append(asyncio.create_task(self._status_loop()))
        return self.session_id

    async def wait_approved(self, timeout: float = 30.0) -> dict:
        row = await self.signals.wait_row(
            lambda r: r["message_type"] in ("join_approved", "disconnect"), timeout)
        if row["message_type"] == "disconnect":
            raise Denied(row["payload"].get("reason", ""))
        self.state = "approved"
        self.event("join_approved", prefs=row["payload"].get("streamPrefs"))
        return row["payload"]

    # ---- negotiation --------------------------------------------------------

    async def start(self, *, candidates_first: bool = False) -> None:
        """Negotiate and keep the session alive (heartbeats) until stop() or the end."""
        if self.ice_servers is None:
            cfg = await self.client.api("ice-config")
            self.ice_servers = cfg.get("iceServers", [])
        await self.negotiate(candidates_first=candidates_first)
        self._tasks.append(asyncio.create_task(self._heartbeat_loop()))

    def _config(self) -> RTCConfiguration:
        servers = []
        for s in self.ice_servers or []:
            urls = s.get("urls")
            servers.append(RTCIceServer(urls=urls, username=s.get("username"), credential=s.get("credential")))
        return RTCConfiguration(iceServers=servers)

    async def _begin_negotiation(self) -> str:
        """Closes the previous peer and starts a negotiation with a fresh negotiationId."""
        await self._close_pc()
        self.negotiation_id = nid = new_negotiation_id()
        self.remote_set = False
        self.pending = []
        self.state = "negotiating"
        return nid

    async def negotiate(self, *, candidates_first: bool = False) -> None:
        nid = await self._begin_negotiation()
        pc = RTCPeerConnection(self._config())
        self.pc = pc
        if self.track is None:
            self.track = PatternTrack(self.width, self.height, self.fps)
        tr = pc.addTransceiver(self.track, direction="sendonly")
        codecs = RTCRtpSender.getCapabilities("video").codecs
        h264 = [c for c in codecs if c.mimeType == "video/H264"
                and c.parameters.get("profile-level-id") == "42e01f"
                and str(c.parameters.get("packetization-mode")) == "1"]
        vp8 = [c for c in codecs if c.mimeType == "video/VP8"]
        rtx = [c for c in codecs if c.mimeType == "video/rtx"]
        tr.setCodecPreferences((h264 + vp8 if self.h264 else vp8) + rtx)
        if self.audio:
            # aiortc gives every track of one peer connection the same stream id.
            pc.addTransceiver(AudioStreamTrack(), direction="sendonly")

        @pc.on("connectionstatechange")
        async def on_state():
            if self.pc is pc:
                await self._connection_changed(pc.connectionState)

        offer = await pc.createOffer()
        await pc.setLocalDescription(offer)
        sdp, candidates = split_candidates(pc.localDescription.sdp)
        self.offer_sdp = sdp
        mvideo = [ln for ln in sdp.splitlines() if ln.startswith("m=video")]
        self.event("offer", negotiationId=nid, m_video=mvideo[0] if mvideo else "")
        self.sent_candidates = len(candidates)
        rows = [("ice_candidate", {"negotiationId": nid, **c}) for c in candidates]
        rows.append(("ice_candidate", {"negotiationId": nid, "endOfCandidates": True}))
        offer_row = ("offer", {"type": "offer", "sdp": sdp, "negotiationId": nid})
        # spec §8: one row per candidate, then endOfCandidates. Tests may send the
        # candidates first, to check that the receiver buffers them (spec §6).
        rows = rows + [offer_row] if candidates_first else [offer_row] + rows
        for t, payload in rows:
            await self.signals.send(t, payload)

    async def _row_loop(self) -> None:
        while True:
            row = await self._rows.get()
            try:
                await self._handle_row(row)
            except Exception as e:  # a bad row must not stop the sender
                self.event("row_error", type=row.get("message_type"), error=repr(e))

    async def _handle_row(self, row: dict) -> None:
        p = row.get("payload") or {}
        t = row.get("message_type")
        if t == "disconnect":
            self.end_reason = p.get("reason", "")
            self.event("disconnect_received", reason=self.end_reason)
            await self._finish()
            return
        nid = p.get("negotiationId")
        if nid != self.negotiation_id or self.pc is None:
            return  # another negotiation: ignored (spec §6)
        if t == "answer":
            if self.remote_set:
                return
            await self.pc.setRemoteDescription(RTCSessionDescription(sdp=p["sdp"], type="answer"))
            self.remote_set = True
            self.event("answer_applied", negotiationId=nid, buffered=len(self.pending))
            for c in self.pending:
                await add_remote_candidate(self.pc, c)
            self.pending = []
        elif t == "ice_candidate":
            if self.remote_set:
                await add_remote_candidate(self.pc, p)
            else:
                self.pending.append(p)

    async def _status_loop(self) -> None:
        seen = 0
        while True:
            async with self.signals.changed:
                await self.signals.changed.wait()
            for s in self.signals.statuses[seen:]:
                if s in ("disconnected", "expired"):
                    self.end_reason = self.end_reason or f"status:{s}"
                    self.event("session_ended", status=s)
                    await self._finish()
                    return
            seen = len(self.signals.statuses)

    async def _connection_changed(self, s: str) -> None:
        self.event("connection", state=s)
        if s == "connected":
            self.attempts = 0  # spec §11: a successful connection resets the counter
            if self._disconnected_timer:
                self._disconnected_timer.cancel()
                self._disconnected_timer = None
            self.state = "connected"
            self.connected.set()
            if not self._reported_connected:
                self._reported_connected = True
                try:
                    await self.client.api("session-update", {"sessionId": self.session_id, "action": "connected"})
                except ApiError as e:
                    self.event("connected_report_failed", code=e.code)
        elif s == "disconnected" and self._disconnected_timer is None:
            async def later():
                await asyncio.sleep(DISCONNECTED_LIMIT_S)
                self._disconnected_timer = None
                await self._reconnect()
            self._disconnected_timer = asyncio.create_task(later())
        elif s == "failed":
            await self._reconnect()

    async def _reconnect(self) -> None:
        if self._reconnecting or self.ended.is_set():
            return
        self._reconnecting = True
        try:
            self.connected.clear()
            if self.attempts >= len(RECONNECT_BACKOFF_S):
                self.event("gave_up")
                self.state = "failed"
                await self.stop(reason="failed")
                return
            delay = RECONNECT_BACKOFF_S[self.attempts]
            self.attempts += 1
            self.state = "reconnecting"
            self.event("reconnect", attempt=self.attempts, delay=delay)
            await asyncio.sleep(delay)
            if not self.ended.is_set():
                await self.negotiate()
        finally:
            self._reconnecting = False

    async def _heartbeat_loop(self) -> None:
        while not self.ended.is_set():
            await asyncio.sleep(self.heartbeat_s)
            if self.state != "connected":
                continue
            try:
                await self.client.api("session-update", {"sessionId": self.session_id, "action": "heartbeat"})
                self.event("heartbeat")
            except ApiError as e:
                self.event("heartbeat_failed", code=e.code)

    # ---- ending -------------------------------------------------------------

    async def _close_pc(self) -> None:
        if self.pc is not None:
            pc, self.pc = self.pc, None
            await pc.close()

    async def _finish(self) -> None:
        if self.ended.is_set():
            return
        self.state = "ended"
        self.ended.set()
        await self._close_pc()

    async def stop(self, reason: str = "sender_ended") -> None:
        """spec §9/§12: disconnect row, then session-update end (both best effort)."""
        if not self.ended.is_set() and self.session_id:
            try:
                await self.signals.send("disconnect", {"reason": reason})
            except ApiError as e:
                self.event("disconnect_failed", code=e.code)
            try:
                await self.client.api("session-update", {"sessionId": self.session_id, "action": "end"})
            except ApiError as e:
                self.event("end_failed", code=e.code)
            self.event("stopped", reason=reason)
        await self._finish()
        await self.close()

    async def close(self) -> None:
        me = asyncio.current_task()
        for t in self._tasks:
            if t is not me:
                t.cancel()
        await self._close_pc()
        if self.signals:
            await self.signals.close()
        if self.track:
            self.track.stop()


async def _main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--pin")
    g.add_argument("--qr", help="the pairing URL (…/pair?t=…&s=…)")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=720)
    ap.add_argument("--fps", type=float, default=30)
    ap.add_argument("--seconds", type=float, default=0, help="stop after this long (0: until SIGINT/SIGTERM)")
    ap.add_argument("--device-name", default="Reference sender")
    ap.add_argument("--ice-from-server", action="store_true", help="use ice-config (default: host candidates only)")
    ap.add_argument("--vp8", action="store_true", help="offer VP8 only")
    ap.add_argument("--audio", action="store_true", help="add a send-only audio track (silence)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with StackClient(StackConfig.from_env()) as client:
        s = RefSender(client, width=args.width, height=args.height, fps=args.fps,
                      ice_servers=None if args.ice_from_server else [], device_name=args.device_name,
                      h264=not args.vp8, audio=args.audio)
        sid = await s.pair(pin=args.pin, qr_url=args.qr)
        print(f"session {sid}: waiting for approval", flush=True)
        try:
            await s.wait_approved(timeout=600)
        except Denied as e:
            print(f"denied ({e})", flush=True)
            await s.close()
            return 2
        await s.start()
        waits = [asyncio.create_task(stop.wait()), asyncio.create_task(s.ended.wait())]
        if args.seconds:
            waits.append(asyncio.create_task(asyncio.sleep(args.seconds)))
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for w in waits:
            w.cancel()
        ended_by_peer = s.ended.is_set()
        await s.stop()
        print(f"ended: {s.end_reason or 'stopped'}; {s.track.count if s.track else 0} frames sent", flush=True)
        return 1 if ended_by_peer and s.end_reason == "failed" else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(_main()))
