"""The bench's receiver: the integration tests' aiortc answerer, reading the
on-glass timecode of every decoded frame.

Four changes to aiortc for measuring, all on the receiving side only and the
same for every sender:
- it sends transport-cc feedback every 100 ms and no REMB, as Chromium does
  (castkit/twcc_feedback.py: aiortc's own REMB, computed in Python on this
  loaded machine, reads scheduling delays as queueing and would cap a sender
  that honours it far below what loopback carries);
- a video frame leaves the jitter buffer when its last packet (RTP marker
  bit) is in, not when the first packet of the next frame arrives (aiortc's
  rule, which would add one frame interval to every latency);
- the video packet buffer holds 2048 packets, as Chrome's grows to, not
  aiortc's 128: a frame of more than 128 packets (150 KB at castd's 1200-byte
  MTU) could never be assembled there, and aiortc answered every packet past
  the 128th with a PLI. Key frames of the bench's busy 1080p field are that
  large in VP8 (about 200 KB from libvpx at its coarsest quantizer, from castd
  and from GStreamer's vp8enc alike), so the VP8 row decoded no frame at all;
- every media RTP packet's arrival time, payload size and RTP timestamp are
  recorded (the bitrate figures and the largest frame; retransmissions are
  not counted); audio packets apart (AUDIO_PACKETS), and decoded audio is
  counted and its level measured (the audio rows: proof that audio flowed).

A fifth, for a receiver that recovers as Chromium's does: when packets keep arriving but no
frame has been decoded for a second (a frame whose lost packet was never resent, so the
jitter buffer waits for it), or none at all a second after the first packet (the first key
frame lost so), the receiver sends an RTCP PLI, at most one a second (`STALL_PLI_S`), and
gives up what its jitter buffer holds and restarts it at the next key frame, H.264 or VP8
(Chromium's receiver asks for a key frame when its NACKs give up or nothing is decodable,
and drops the frames it cannot decode). Until 2026-12-07 this worked for H.264 only, and
only after a first decoded frame: the media SSRC a PLI names was taken from H.264 packets
alone (receiver_answerer), so on VP8 no PLI ever left, and VP8 casts through a 1 Mbit/s
link showed no picture at all in 3 of 4 rounds: the first key frame (about 44 KB, the
tbf's queue 25 KB) lost packets that the NACKs did not recover, and nothing asked again.
aiortc alone sends a PLI only once 2048 packets have passed the hole and waits for the hole
meanwhile, which at 1-2 Mbit/s is ten seconds or more of frozen picture.

For the latency breakdown (issue 19) it also records when each video frame
left the jitter buffer (FRAMES_OUT) and when aiortc's decoder thread began
and finished decoding it (DECODES), keyed by RTP timestamp, and each decoded
frame carries its RTP timestamp and when its timecode had been read
(`breakdown()` joins them per frame). Recording costs a list append each.
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import aiortc.rtcrtpreceiver as rtcrtpreceiver
import aiortc.codecs as aiortc_codecs
import aiortc.codecs.h264 as aiortc_h264
import aiortc.codecs.vpx as aiortc_vpx
from aiortc.rtcrtpparameters import RTCRtpCodecParameters
from aiortc.jitterbuffer import JitterBuffer, JitterFrame
from aiortc.mediastreams import MediaStreamError

from castkit.bench import timecode
from castkit.bench.h264_qp import SliceQP
from castkit import twcc_feedback
from castkit.receiver_answerer import ReceiverAnswerer

twcc_feedback.install()

# (time.monotonic(), RTP payload bytes, RTP timestamp) of every video packet
PACKETS: list[tuple[float, int, int]] = []
# (time.monotonic(), RTP payload bytes) of every audio packet
AUDIO_PACKETS: list[tuple[float, int]] = []
VIDEO_CAPACITY = 2048   # packets (a power of two, as aiortc requires)
STALL_PLI_S = 1.0       # no decoded frame this long while packets arrive: a PLI (see above)
# (time.monotonic(), RTP timestamp) of every video frame the jitter buffer released
FRAMES_OUT: list[tuple[float, int]] = []
# (decode start, decode end, RTP timestamp) of every video frame, on aiortc's decoder thread
DECODES: list[tuple[float, float, int]] = []


def _timed(decode):
    def wrapper(self, encoded_frame):
        t0 = time.monotonic()
        out = decode(self, encoded_frame)
        DECODES.append((t0, time.monotonic(), encoded_frame.timestamp))   # list.append: one step under the GIL
        return out
    return wrapper


# (time.monotonic(), RTP timestamp, mean slice QP) of every H.264 frame handed to the decoder:
# aiortc's stats have no qpSum, so the QP is read from the slice headers (castkit/bench/h264_qp.py)
QPS: list[tuple[float, int, float]] = []


def _with_qp(decode):
    def wrapper(self, encoded_frame):
        parser = self.__dict__.setdefault("_castd_qp", SliceQP())
        qps = parser.access_unit(bytes(encoded_frame.data))
        if qps:
            QPS.append((time.monotonic(), encoded_frame.timestamp, sum(qps) / len(qps)))
        return decode(self, encoded_frame)
    return wrapper


aiortc_h264.H264Decoder.decode = _with_qp(_timed(aiortc_h264.H264Decoder.decode))
aiortc_vpx.Vp8Decoder.decode = _timed(aiortc_vpx.Vp8Decoder.decode)


@contextlib.contextmanager
def accepting_h264_high():
    """While inside, aiortc answerers in this process take H.264 Constrained High (640c1f) as
    well as aiortc's own 42001f and 42e01f (the bench's High-against-Baseline rows): aiortc
    answers the offer's codecs, in the offer's order, that match its list by profile
    (rtcpeerconnection.is_codec_compatible), and its decoder is libavcodec's, which decodes
    High. H.264 decoding is exact, so the luma compared is the one any conforming decoder
    (Chromium's included) makes of the same stream. Aiortc's list is restored on the way out."""
    video = aiortc_codecs.CODECS["video"]
    before = list(video)
    pt = max(c.payloadType for c in video) + 1
    h264 = next(c for c in video if c.mimeType == "video/H264")
    video += [RTCRtpCodecParameters(mimeType="video/H264", clockRate=90000, payloadType=pt,
                                    rtcpFeedback=list(h264.rtcpFeedback),
                                    parameters=dict(h264.parameters) | {"profile-level-id": "640c1f"}),
              RTCRtpCodecParameters(mimeType="video/rtx", clockRate=90000, payloadType=pt + 1,
                                    parameters={"apt": pt})]
    try:
        yield
    finally:
        video[:] = before


def starts_h264_keyframe(payload: bytes) -> bool:
    """Whether an H.264 RTP payload (RFC 6184) begins a key frame: an SPS, alone or first in a
    STAP-A, or the first fragment (FU-A, S bit) or the whole of an IDR slice."""
    if len(payload) < 2:
        return False
    kind = payload[0] & 0x1F
    if kind == 24:                     # STAP-A: 2-byte size, then the first NAL unit
        return len(payload) > 3 and payload[3] & 0x1F in (5, 7)
    if kind == 28:                     # FU-A: the FU header's S bit and type
        return bool(payload[1] & 0x80) and payload[1] & 0x1F == 5
    return kind in (5, 7)


def starts_vp8_keyframe(payload: bytes) -> bool:
    """Whether a VP8 RTP payload (RFC 7741) begins a key frame: the descriptor's S bit with
    partition index 0, and the VP8 payload header's P bit (inverse key frame flag) clear."""
    if len(payload) < 2:
        return False
    if not payload[0] & 0x10 or payload[0] & 0x07:      # S, PID
        return False
    at = 1
    if payload[0] & 0x80:                                 # X: the extension byte I L T K
        ext = payload[1]
        at = 2
        if ext & 0x80:                                    # I: PictureID, 7 or 15 bits (M)
            if len(payload) <= at:
                return False
            at += 2 if payload[at] & 0x80 else 1
        if ext & 0x40:                                    # L: TL0PICIDX
            at += 1
        if ext & 0x30:                                    # T or K: TID / Y / KEYIDX
            at += 1
    return len(payload) > at and not payload[at] & 0x01


class MarkerJitterBuffer(JitterBuffer):
    def __init__(self, capacity: int, prefetch: int = 0, is_video: bool = False) -> None:
        super().__init__(max(capacity, VIDEO_CAPACITY) if is_video else capacity, prefetch, is_video)
        self.waiting_for_keyframe = None

    def restart_at_keyframe(self, starts_keyframe) -> None:
        """Drops what it holds and every packet until one that starts a key frame
        (`starts_keyframe`: starts_h264_keyframe or starts_vp8_keyframe), as Chromium's receiver
        drops undecodable frames once it has asked for a key frame."""
        self._packets = [None] * self._capacity
        self._origin = None
        self.waiting_for_keyframe = starts_keyframe

    def add(self, packet):
        if self._is_video:
            PACKETS.append((time.monotonic(), len(packet.payload), packet.timestamp))
            if self.waiting_for_keyframe:
                if not self.waiting_for_keyframe(packet.payload):
                    return False, None
                self.waiting_for_keyframe = None
        else:
            AUDIO_PACKETS.append((time.monotonic(), len(packet.payload)))
        return super().add(packet)

    def _remove_frame(self, sequence_number: int):
        if not self._is_video:
            return super()._remove_frame(sequence_number)
        frame = self._assemble()
        if frame is not None:
            FRAMES_OUT.append((time.monotonic(), frame.timestamp))
        return frame

    def _assemble(self):
        packets, timestamp = [], None
        for count in range(self.capacity):
            packet = self._packets[(self._origin + count) % self._capacity]
            if packet is None:
                return None
            if timestamp is not None and packet.timestamp != timestamp:
                # the previous frame ended without a marker (lost or absent): aiortc's rule
                frame = JitterFrame(data=b"".join(p._data for p in packets), timestamp=timestamp)
                self.remove(count)
                return frame
            timestamp = packet.timestamp
            packets.append(packet)
            if packet.marker:
                frame = JitterFrame(data=b"".join(p._data for p in packets), timestamp=timestamp)
                self.remove(count + 1)
                return frame
        return None


rtcrtpreceiver.JitterBuffer = MarkerJitterBuffer


@dataclass
class Sample:
    decoded: float             # time.monotonic() when the decoded frame reached us
    drawn: float | None        # when the painter drew the code it shows (None: unreadable)
    painter_frame: int | None
    width: int
    height: int
    rtp_timestamp: int | None = None   # the decoded frame's pts (aiortc: the RTP timestamp)
    read: float | None = None          # time.monotonic() once its timecode had been read


@dataclass
class Recording:
    samples: list[Sample] = field(default_factory=list)
    # (time.monotonic(), samples per channel, RMS dBFS of channel 0) of every decoded audio frame
    audio: list[tuple[float, int, float]] = field(default_factory=list)
    # the quality bench: (time.monotonic(), timecode value, painter frame, decoded luma h × w) of
    # decoded frames with a readable timecode, at most one per `keep_luma_every` seconds
    lumas: list[tuple[float, int, int, np.ndarray]] = field(default_factory=list)
    # what the stream says of its colour (the decoded frames' colorspace and color_range, libavcodec's
    # AVColorSpace and AVColorRange numbers, from the H.264 VUI): the luma the quality rows compare with
    color: tuple[int, int] | None = None


class TimecodeReceiver(ReceiverAnswerer):
    """Answers like the tests' receiver; for each decoded frame reads the timecode
    from the luma plane (no RGB conversion: cheap enough for 1080p30 in Python)."""

    def __init__(self, client, session_id: str, screen_width: int, codec: str | None = None,
                 keep_luma_every: float | None = None):
        super().__init__(client, session_id, keep_frames=1, codec=codec)
        self.screen_width = screen_width
        self.rec = Recording()
        self.keep_luma_every = keep_luma_every   # seconds; None: keep no pictures
        self._kept_at = 0.0

    async def _watch_stalls(self) -> None:
        """A PLI when packets arrive and no frame has been decoded for STALL_PLI_S, or none yet
        STALL_PLI_S after the first packet (at most one per STALL_PLI_S); each one is in
        self.keyframes.requests as "pli"."""
        last_pli = 0.0
        before = len(PACKETS)     # PACKETS holds earlier casts' packets too
        while True:
            await asyncio.sleep(0.1)
            now = time.monotonic()
            decoded = self.rec.samples[-1].decoded if self.rec.samples else None
            since = decoded if decoded is not None else PACKETS[before][0] if len(PACKETS) > before else None
            if (since is not None and now - since > STALL_PLI_S and now - PACKETS[-1][0] < 0.5
                    and now - last_pli > STALL_PLI_S and self.receiver is not None and self.media_ssrc is not None):
                last_pli = now
                jb = getattr(self.receiver, "_RTCRtpReceiver__jitter_buffer", None)
                names = " ".join(self.codecs)
                starts = starts_h264_keyframe if "H264" in names else starts_vp8_keyframe if "VP8" in names else None
                if isinstance(jb, MarkerJitterBuffer) and starts:
                    jb.restart_at_keyframe(starts)   # the stalled frame is given up; decoding resumes at the key frame
                try:
                    await self.send_pli()
                except Exception:  # noqa: BLE001 (the connection is closing)
                    return

    async def _consume(self, track, nid: str) -> None:
        watch = asyncio.create_task(self._watch_stalls())
        self._tasks.append(watch)
        try:
            while True:
                frame = await track.recv()
                now = time.monotonic()
                drawn, n = None, None
                if frame.format.name in ("yuv420p", "yuvj420p"):
                    plane = frame.planes[0]
                    y = np.frombuffer(plane, np.uint8).reshape(plane.height, plane.line_size)
                    got = timecode.read_luma(y, frame.width / self.screen_width)
                    if got:
                        us = timecode.unwrap(got[0], int(now * 1e6))
                        drawn, n = us / 1e6, got[1]
                        if self.keep_luma_every is not None and now - self._kept_at >= self.keep_luma_every:
                            self._kept_at = now   # compared after the round (quality.py): too slow here
                            self.rec.color = (int(frame.colorspace), int(frame.color_range))
                            self.rec.lumas.append((now, got[0], got[1], y[:frame.height, :frame.width].copy()))
                self.rec.samples.append(Sample(now, drawn, n, frame.width, frame.height, frame.pts,
                                               time.monotonic()))
                self.recent_frames[:] = [frame]
                self.frame_event.set()
        except MediaStreamError:
            return
        finally:
            watch.cancel()

    def _on_audio_track(self, track) -> None:
        self._tasks.append(asyncio.create_task(self._consume_audio(track)))

    async def _consume_audio(self, track) -> None:
        try:
            while True:
                frame = await track.recv()
                # aiortc decodes Opus to packed s16 at 48 kHz: (1, samples × channels)
                pcm = frame.to_ndarray().reshape(-1, len(frame.layout.channels))[:, 0].astype(np.float64) / 32768
                rms = float(np.sqrt(np.mean(np.square(pcm)))) if len(pcm) else 0.0
                self.rec.audio.append((time.monotonic(), len(pcm), 20 * np.log10(max(rms, 1e-9))))
        except MediaStreamError:
            return


# The stages of glass-to-glass one frame went through, in order, as (name, from, to) on the
# receiver's clock (the same CLOCK_MONOTONIC the painter stamps): their sum is the latency.
STAGES = (
    ("drawn_to_first_packet", "drawn", "first_packet"),     # the sender's whole share, and loopback
    ("first_to_last_packet", "first_packet", "last_packet"),  # the frame's packets spread (pacing)
    ("last_packet_to_jitter_out", "last_packet", "jitter_out"),
    ("jitter_out_to_decode_start", "jitter_out", "decode_start"),   # to aiortc's decoder thread
    ("decode", "decode_start", "decode_end"),                 # PyAV (libavcodec) decoding
    ("decode_end_to_consumer", "decode_end", "decoded"),      # back to the event loop, track.recv()
)


def breakdown(samples: list[Sample], packets=None, frames_out=None, decodes=None) -> list[dict]:
    """Per decoded frame with a readable timecode: the instant of each stage (see STAGES),
    joined by RTP timestamp. aiortc hands its decoder (and the decoded frame's pts) the RTP
    timestamp less the first frame's (its TimestampMapper), so packets and frames out of the
    jitter buffer are mapped the same way, from the first frame out. A frame whose timestamp
    is missing from a record is left out (one that came in twice keeps its first record)."""
    packets = PACKETS if packets is None else packets
    frames_out = FRAMES_OUT if frames_out is None else frames_out
    decodes = DECODES if decodes is None else decodes
    if not frames_out:
        return []
    origin = frames_out[0][1]
    out_at: dict[int, float] = {}
    for t, raw in frames_out:
        out_at.setdefault((raw - origin) % 2**32, t)
    first: dict[int, float] = {}
    last: dict[int, float] = {}
    for t, _, raw in packets:
        ts = (raw - origin) % 2**32
        if ts in out_at and t > out_at[ts]:
            continue   # a copy or retransmission of a packet the frame had already
        first.setdefault(ts, t)
        last[ts] = t
    dec: dict[int, tuple[float, float]] = {}
    for t0, t1, ts in decodes:
        dec.setdefault(ts, (t0, t1))
    rows = []
    for s in samples:
        ts = s.rtp_timestamp
        if s.drawn is None or ts is None or ts not in first or ts not in out_at or ts not in dec:
            continue
        at = {"drawn": s.drawn, "first_packet": first[ts], "last_packet": last[ts], "jitter_out": out_at[ts],
              "decode_start": dec[ts][0], "decode_end": dec[ts][1], "decoded": s.decoded}
        row = {name: (at[b] - at[a]) * 1000 for name, a, b in STAGES}
        row["glass_to_glass"] = (s.decoded - s.drawn) * 1000
        if s.read is not None:
            row["timecode_read"] = (s.read - s.decoded) * 1000   # after the latency was taken: not in it
        rows.append(row)
    return rows
