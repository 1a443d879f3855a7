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
  not counted).
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import aiortc.rtcrtpreceiver as rtcrtpreceiver
from aiortc.jitterbuffer import JitterBuffer, JitterFrame
from aiortc.mediastreams import MediaStreamError

from benchkit import timecode
from castkit import twcc_feedback
from castkit.receiver_answerer import ReceiverAnswerer

twcc_feedback.install()

# (time.monotonic(), RTP payload bytes, RTP timestamp) of every video packet
PACKETS: list[tuple[float, int, int]] = []
VIDEO_CAPACITY = 2048   # packets (a power of two, as aiortc requires)


class MarkerJitterBuffer(JitterBuffer):
    def __init__(self, capacity: int, prefetch: int = 0, is_video: bool = False) -> None:
        super().__init__(max(capacity, VIDEO_CAPACITY) if is_video else capacity, prefetch, is_video)

    def add(self, packet):
        if self._is_video:
            PACKETS.append((time.monotonic(), len(packet.payload), packet.timestamp))
        return super().add(packet)

    def _remove_frame(self, sequence_number: int):
        if not self._is_video:
            return super()._remove_frame(sequence_number)
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


@dataclass
class Recording:
    samples: list[Sample] = field(default_factory=list)


class TimecodeReceiver(ReceiverAnswerer):
    """Answers like the tests' receiver; for each decoded frame reads the timecode
    from the luma plane (no RGB conversion: cheap enough for 1080p30 in Python)."""

    def __init__(self, client, session_id: str, screen_width: int, codec: str | None = None):
        super().__init__(client, session_id, keep_frames=1, codec=codec)
        self.screen_width = screen_width
        self.rec = Recording()

    async def _consume(self, track, nid: str) -> None:
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
                self.rec.samples.append(Sample(now, drawn, n, frame.width, frame.height))
                self.recent_frames[:] = [frame]
                self.frame_event.set()
        except MediaStreamError:
            return
