"""Transport-wide congestion control feedback for aiortc receivers.

aiortc sends only REMB, computed by a Python port of libwebrtc's receive-side
estimator from abs-send-time. On a loaded two-core machine its arrival times
carry the event loop's scheduling delays, which that estimator reads as
queueing: its REMB then caps a sender far below what loopback carries (castd
honours REMB, as libwebrtc does). Chromium, Firefox and webrtcbin — the
receivers castd is built for — send transport-cc feedback instead and no REMB.

`install()` makes aiortc answer like them (process-wide, until `uninstall()`;
`installed()` is the same as a context manager, for tests sharing a process): the video m-line's header
extensions become mid + transport-wide-cc (abs-send-time is dropped, so
aiortc computes no REMB), every SRTP-decrypted RTP packet's transport-wide
sequence number and arrival time are recorded before aiortc routes it
(probes and retransmissions included, as a browser counts them), and each
DTLS transport sends a feedback packet every 100 ms, Chrome's interval.

The wire format is draft-holmer-rmcat-transport-wide-cc-extensions-01 §3.1:
2-bit status-vector chunks (7 symbols), deltas in 250 µs units, the
reference time in 64 ms units, zero padding announced by the RTCP P bit.
"""
from __future__ import annotations

import asyncio
import contextlib
import struct
import time

TWCC_URI = "http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01"
FEEDBACK_INTERVAL_S = 0.100   # Chrome sends one about every 100 ms
MAX_STATUS_PER_PACKET = 700   # keeps a feedback packet well under the MTU

_saved: tuple | None = None   # what install() replaced: (video header extensions, _handle_rtp_data)


class _Recorder:
    """Arrivals on one DTLS transport, unwrapped to 64-bit sequence numbers."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.arrivals: dict[int, int] = {}   # unwrapped seq -> arrival µs since t0
        self.highest: int | None = None
        self.next_base: int | None = None    # first sequence number not yet reported
        self.fb_count = 0
        self.media_ssrc = 0
        self.task: asyncio.Task | None = None

    def record(self, seq16: int, now: float) -> None:
        if self.highest is None:
            seq = seq16
        else:
            delta = (seq16 - (self.highest & 0xFFFF)) & 0xFFFF
            seq = self.highest + delta if delta < 0x8000 else self.highest + delta - 0x10000
        if self.next_base is None:
            self.next_base = seq
        if seq < self.next_base:
            return   # already reported (as lost): too late now
        self.arrivals.setdefault(seq, int((now - self.t0) * 1e6))
        self.highest = seq if self.highest is None else max(self.highest, seq)

    def feedback_packets(self, sender_ssrc: int) -> list[bytes]:
        out = []
        while self.next_base is not None and self.highest is not None and self.next_base <= self.highest:
            base = self.next_base
            end = min(self.highest, base + MAX_STATUS_PER_PACKET - 1)
            out.append(self._build(sender_ssrc, base, end))
            for s in range(base, end + 1):
                self.arrivals.pop(s, None)
            self.next_base = end + 1
        return out

    def _build(self, sender_ssrc: int, base: int, end: int) -> bytes:
        received = [(s, self.arrivals[s]) for s in range(base, end + 1) if s in self.arrivals]
        ref_64ms = received[0][1] // 64_000 if received else 0
        prev = ref_64ms * 64_000
        symbols: list[int] = []
        deltas = bytearray()
        for s in range(base, end + 1):
            at = self.arrivals.get(s)
            if at is None:
                symbols.append(0)
                continue
            d = round((at - prev) / 250)
            prev += d * 250
            if 0 <= d <= 255:
                symbols.append(1)
                deltas.append(d)
            else:
                d = max(-32768, min(32767, d))
                symbols.append(2)
                deltas += struct.pack("!h", d)
        chunks = bytearray()
        for i in range(0, len(symbols), 7):
            group = symbols[i:i + 7] + [0] * (7 - len(symbols[i:i + 7]))
            word = 0xC000   # status vector chunk, 2-bit symbols
            for k, sym in enumerate(group):
                word |= sym << (12 - 2 * k)
            chunks += struct.pack("!H", word)
        body = struct.pack("!IIHHI", sender_ssrc, self.media_ssrc, base & 0xFFFF, end - base + 1,
                           ((ref_64ms & 0xFFFFFF) << 8) | (self.fb_count & 0xFF)) + chunks + deltas
        self.fb_count += 1
        pad = (-len(body)) % 4
        p_bit = 0
        if pad:
            body += bytes(pad - 1) + bytes([pad])
            p_bit = 0x20
        length_words = (4 + len(body)) // 4 - 1
        return struct.pack("!BBH", 0x80 | p_bit | 15, 205, length_words) + body


def install() -> None:
    """Patch aiortc (process-wide, idempotent) to send transport-cc feedback and no REMB."""
    global _saved
    if _saved is not None:
        return
    from aiortc import codecs, rtcdtlstransport
    _saved = (codecs.HEADER_EXTENSIONS["video"], rtcdtlstransport.RTCDtlsTransport._handle_rtp_data)
    from aiortc.rtcrtpparameters import RTCRtpHeaderExtensionParameters
    from aiortc.rtp import RtpPacket

    codecs.HEADER_EXTENSIONS["video"] = [
        RTCRtpHeaderExtensionParameters(id=1, uri="urn:ietf:params:rtp-hdrext:sdes:mid"),
        RTCRtpHeaderExtensionParameters(id=3, uri=TWCC_URI),
    ]

    async def _handle_rtp_data(self, data: bytes, arrival_time_ms: int) -> None:
        now = time.monotonic()
        try:
            packet = RtpPacket.parse(data, self._rtp_header_extensions_map)
        except ValueError:
            return
        seq = packet.extensions.transport_sequence_number
        if seq is not None:
            rec = getattr(self, "_twcc_recorder", None)
            if rec is None:
                rec = self._twcc_recorder = _Recorder()
                rec.media_ssrc = packet.ssrc
                rec.task = asyncio.ensure_future(_feedback_loop(self, rec))
            rec.record(seq, now)
        receiver = self._rtp_router.route_rtp(packet)
        if receiver is not None:
            await receiver._handle_rtp_packet(packet, arrival_time_ms=arrival_time_ms)

    rtcdtlstransport.RTCDtlsTransport._handle_rtp_data = _handle_rtp_data


def uninstall() -> None:
    """Undo install(): transports made after this answer and behave as stock aiortc."""
    global _saved
    if _saved is None:
        return
    from aiortc import codecs, rtcdtlstransport
    codecs.HEADER_EXTENSIONS["video"], rtcdtlstransport.RTCDtlsTransport._handle_rtp_data = _saved
    _saved = None


@contextlib.contextmanager
def installed():
    install()
    try:
        yield
    finally:
        uninstall()


async def _feedback_loop(transport, rec: _Recorder) -> None:
    sender_ssrc = 0x7C0FFEE0
    try:
        while transport.state != "closed":
            await asyncio.sleep(FEEDBACK_INTERVAL_S)
            for pkt in rec.feedback_packets(sender_ssrc):
                try:
                    await transport._send_rtp(pkt)
                except ConnectionError:
                    return
    except asyncio.CancelledError:
        return
