"""Lip sync, measured (issue 18): castd casts an Xvfb screen and a private PipeWire's sink
monitor to aiortc; flashclick.py flashes the screen white and clicks into the sink at the
same instant every --period seconds; the receiver maps each flash's and each click's RTP
timestamp to castd's NTP time through the last RTCP sender report (RFC 3550 §6.4.1) of that
stream's SSRC, and reports offset = click NTP time − flash NTP time per event (positive:
the sound is late), its median and spread.

    .venv/bin/python IntegrationTests/castkit/bench/lipsync.py [--events 10] [--period 2] [--castd PATH] [--json FILE]

Two figures per event:
- offset (`median_ms`): everything from the stimulus to the receiver's decoded output on both
  paths (the X server and castd's 30 fps capture for the flash; the player, PipeWire,
  castd's capture and Opus for the click; both packetizers), with the stimulus skew (the
  flash's paint time − its due time, printed by the driver) taken out;
- castd's own (`castd_own_median_ms`): that offset minus how late the driver's own recorder
  (pw-cat --record on the sink's monitor) read the click back, i.e. the audio latency that
  arises before castd's capture (the player's, which under load grew from 20 ms to 1 s
  within a run). A recorder's latency is in that subtraction too, so the figure leans
  towards "sound early" by it (≤ 10 ms node latency plus read scheduling).
The 2 s period is 60 frame intervals at 30 fps, so every flash lands at the same phase of
castd's capture ticks: the spread does not show the ±17 ms capture quantisation, the
median carries one fixed phase of it. ITU-R BT.1359: detectable beyond 45 ms sound early
(−125 ms late); the issue asks |median| ≤ 45 ms.

Exit 0 with JSON on stdout; a benchmark, not a test.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from aiortc.mediastreams import MediaStreamError
from aiortc.rtp import RtcpSrPacket

from castkit.audio_rig import PipeWireAudioRig
from castkit.castd_proc import Daemon, castd_env, pair
from castkit.devstack import devstack_down, devstack_up
from castkit.receiver_answerer import ReceiverAnswerer
from castkit.xscreen import free_display

HERE = Path(__file__).resolve().parent
VIDEO_RATE, AUDIO_RATE = 90_000, 48_000      # RFC 6184 §8.2.1 (H.264), RFC 7587 §4.1 (Opus)
CLICK_LEVEL = 0.1                            # full scale 1: the click peaks at 0.8, silence is 0
WHITE = 128                                  # mean luma above which a frame is the flash


def ntp_seconds(ntp64: int) -> float:
    """RFC 3550 §4: 32.32 fixed-point seconds."""
    return ntp64 / 2**32


def rtp_delta(a: int, b: int) -> int:
    """a − b of 32-bit RTP timestamps, wrap-aware (RFC 3550 §5.1)."""
    d = (a - b) & 0xFFFFFFFF
    return d - 2**32 if d >= 2**31 else d


class SyncReceiver(ReceiverAnswerer):
    """The integration tests' aiortc answerer, also taking the audio track, keeping every
    sender report per SSRC, and recording (RTP timestamp, …) of the flash and click onsets."""

    def __init__(self, client, session_id: str):
        super().__init__(client, session_id, keep_frames=1)
        self.srs: dict[int, tuple[int, int]] = {}     # ssrc → (NTP 64-bit, RTP timestamp) of its last SR
        self.sr_count: dict[int, int] = {}
        self.flashes: list[tuple[int, float]] = []    # (video RTP ts, NTP s by the then-last SR)
        self.clicks: list[tuple[int, float]] = []     # (audio RTP ts, NTP s)
        self.video_ssrc: int | None = None
        self.audio_ssrc: int | None = None
        self.audio_frames = 0

    async def _answer(self, offer: dict) -> None:
        await super()._answer(offer)
        for t in self.pc.getTransceivers():
            r = t.receiver
            self._tap_srs(r)
            if t.kind == "audio":
                self._tap_audio_ssrc(r)
                self._tasks.append(asyncio.create_task(self._consume_audio(r)))

    def _tap_srs(self, receiver) -> None:
        handle = receiver._handle_rtcp_packet

        async def tap(packet):
            if isinstance(packet, RtcpSrPacket):
                self.srs[packet.ssrc] = (packet.sender_info.ntp_timestamp, packet.sender_info.rtp_timestamp)
                self.sr_count[packet.ssrc] = self.sr_count.get(packet.ssrc, 0) + 1
            await handle(packet)
        receiver._handle_rtcp_packet = tap

    def _tap_audio_ssrc(self, receiver) -> None:
        handle = receiver._handle_rtp_packet

        async def tap(packet, arrival_time_ms):
            self.audio_ssrc = packet.ssrc
            await handle(packet, arrival_time_ms=arrival_time_ms)
        receiver._handle_rtp_packet = tap

    def _ntp(self, ssrc: int | None, rtp: int, rate: int) -> float | None:
        sr = self.srs.get(ssrc)
        if sr is None:
            return None
        return ntp_seconds(sr[0]) + rtp_delta(rtp, sr[1]) / rate

    @staticmethod
    def _rtp(receiver, pts: int) -> int | None:
        """aiortc hands out pts = RTP timestamp − the stream's first one (its TimestampMapper);
        the RTP timestamp back, for the SR mapping."""
        mapper = getattr(receiver, "_RTCRtpReceiver__timestamp_mapper", None)
        origin = getattr(mapper, "_origin", None)
        return None if origin is None else (pts + origin) & 0xFFFFFFFF

    async def _consume(self, track, nid: str) -> None:
        lit = False
        try:
            while True:
                frame = await track.recv()
                self.frames.append(frame.pts)
                self.frame_event.set()
                self.video_ssrc = self.media_ssrc
                y = frame.to_ndarray(format="gray")
                bright = float(y[::4, ::4].mean()) > WHITE
                rtp = self._rtp(self.receiver, frame.pts) if frame.pts is not None else None
                if bright and not lit and rtp is not None:
                    ntp = self._ntp(self.video_ssrc, rtp, VIDEO_RATE)
                    if ntp is not None:
                        self.flashes.append((rtp, ntp))
                lit = bright
        except MediaStreamError:
            return

    async def _consume_audio(self, receiver) -> None:
        quiet = 0
        try:
            while True:
                frame = await receiver.track.recv()
                self.audio_frames += 1
                x = frame.to_ndarray().reshape(-1, len(frame.layout.channels))[:, 0].astype(np.float64) / 32768
                loud = np.flatnonzero(np.abs(x) > CLICK_LEVEL)
                if loud.size and quiet >= AUDIO_RATE // 2 and frame.pts is not None:
                    base = self._rtp(receiver, frame.pts)
                    rtp = None if base is None else (base + int(loud[0])) & 0xFFFFFFFF
                    ntp = None if rtp is None else self._ntp(self.audio_ssrc, rtp, AUDIO_RATE)
                    if ntp is not None:
                        self.clicks.append((rtp, ntp))
                quiet = 0 if loud.size else quiet + len(x)
        except MediaStreamError:
            return


NTP_UNIX = 2_208_988_800                     # RFC 5905 §6: 1900 → 1970 in seconds


def pair_events(flashes: list[float], clicks: list[float], due_unix: dict[int, float],
                period: float) -> list[tuple[int, float]]:
    """(event number, click − flash) for each click matched with the nearest flash within
    period/2; the event is the driver's whose due time (Unix) is nearest the flash's NTP time
    (castd's NTP is Unix time plus RFC 5905's offset: the two clocks agree within ms here)."""
    out = []
    for c in clicks:
        if not flashes:
            break
        f = min(flashes, key=lambda f: abs(c - f))
        if abs(c - f) < period / 2 and due_unix:
            n = min(due_unix, key=lambda n: abs(due_unix[n] - (f - NTP_UNIX)))
            out.append((n, c - f))
    return out


async def measure(stack, events: int = 10, period: float = 2.0, calibrate: bool = True) -> dict:
    """One run on `stack` (a started local stack): `events` flash+click pairs `period` s apart."""
    rig = await PipeWireAudioRig().start()
    home = Path(tempfile.mkdtemp(prefix="castd-lipsync."))
    n = free_display()
    xvfb = subprocess.Popen(["Xvfb", f":{n}", "-screen", "0", "640x360x24", "-nolisten", "tcp", "-noreset"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    driver = daemon = rx = None
    try:
        for _ in range(200):
            if os.path.exists(f"/tmp/.X11-unix/X{n}"):
                break
            await asyncio.sleep(0.05)
        receiver, rc, _, raw = await pair(stack, home)
        assert rc == 0, raw
        sid = receiver.session["sessionId"]
        rx = SyncReceiver(receiver.client, sid)
        await rx.start()
        env = castd_env(stack, home, DISPLAY=f":{n}", **rig.env())
        daemon = await Daemon.start(env, sid, "--capture", "x11")
        await daemon.wait_log("event=audio_started", timeout=40)
        await rx.wait_frames(10, timeout=40)
        # Both streams' SRs in before the first event (castd sends one per stream about every second).
        for _ in range(100):
            if len(rx.srs) >= 2:
                break
            await asyncio.sleep(0.1)
        driver = await asyncio.create_subprocess_exec(
            sys.executable, str(HERE / "flashclick.py"), "--display", f":{n}", "--period", str(period),
            "--count", str(events + 1), "--lead-in", "2", *(["--calibrate"] if calibrate else []),
            env={**os.environ, **rig.env()}, stdout=asyncio.subprocess.PIPE)
        lines = [json.loads(l) for l in (await asyncio.wait_for(driver.communicate(),
                                                                  period * (events + 4) + 30))[0].splitlines()]
        await asyncio.sleep(1.0)   # the last event through the receiver
        skews = {m["n"]: m["at"] - m["due"] for m in lines if m["type"] == "flash"}
        loopback = {m["n"]: m["seconds"] for m in lines if m["type"] == "loopback"}
        due_unix = {m["n"]: m["due_unix"] for m in lines if m["type"] == "flash"}
        pairs = pair_events([f for _, f in rx.flashes], [c for _, c in rx.clicks], due_unix, period)
        raw_offsets = [o for _, o in pairs]
        # Each flash was painted `skew` after its due time (the click is due on time): add it back.
        offsets = [o + skews.get(k, 0.0) for k, o in pairs]
        # castd's own share: the offset minus how late the click reached the sink's monitor.
        own = [o + skews.get(k, 0.0) - loopback[k] for k, o in pairs if k in loopback]
        res = {
            "events": len(offsets),
            "offset_ms": [round(o * 1000, 1) for o in offsets],
            "median_ms": round(float(np.median(offsets)) * 1000, 1) if offsets else None,
            "spread_ms": {"p10": round(float(np.percentile(offsets, 10)) * 1000, 1),
                          "p90": round(float(np.percentile(offsets, 90)) * 1000, 1),
                          "stdev": round(float(np.std(offsets)) * 1000, 1)} if offsets else None,
            "castd_own_ms": [round(o * 1000, 1) for o in own],
            "castd_own_median_ms": round(float(np.median(own)) * 1000, 1) if own else None,
            "uncorrected_median_ms": round(float(np.median(raw_offsets)) * 1000, 1) if raw_offsets else None,
            "stimulus_skew_ms": [round(s * 1000, 1) for s in skews.values()],
            "flashes_seen": len(rx.flashes), "clicks_heard": len(rx.clicks),
            "sender_reports": {str(k): v for k, v in rx.sr_count.items()},
            "video_ssrc": rx.video_ssrc, "audio_ssrc": rx.audio_ssrc,
            "flash_ntp": [round(f, 4) for _, f in rx.flashes], "click_ntp": [round(c, 4) for _, c in rx.clicks],
            "player_loopback_ms": [round(x * 1000, 1) for x in loopback.values()],
        }
        return res
    finally:
        if driver and driver.returncode is None:
            driver.kill()
        if daemon:
            await daemon.kill()
        if rx:
            await rx.close()
            await rx.client.close()
        xvfb.kill()
        rig.stop()
        shutil.rmtree(home, ignore_errors=True)


async def run(args) -> dict:
    stack = devstack_up()
    try:
        return await measure(stack, args.events, args.period, args.calibrate)
    finally:
        devstack_down(stack.state_dir)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=10)
    ap.add_argument("--period", type=float, default=2.0)
    ap.add_argument("--no-calibrate", dest="calibrate", action="store_false",
                    help="do not record the sink's monitor in the driver (no castd_own figures)")
    ap.add_argument("--castd", help="a castd binary (default: the release build of this tree)")
    ap.add_argument("--json", type=Path, help="also write the result here")
    args = ap.parse_args()
    if args.castd:
        os.environ["CASTD_BIN_DIR"] = str(Path(args.castd).resolve().parent)
    res = asyncio.run(run(args))
    text = json.dumps(res, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
