"""Chromium's own libwebrtc as a sender: a headless Chromium page draws a busy 1080p canvas
with the bench's on-glass timecode and sends it with RTCPeerConnection; the signaling (pair
by PIN, wait for approval, offer, trickled candidates, answer, heartbeats, disconnect) is the
reference sender's (castkit/ref_sender.RefSender), in Python. The page does only the peer
connection, driven over the DevTools protocol.

The picture is the bench painter's (IntegrationTests/castkit/bench/painter.py): random 8×8 blocks
(xorshift32, seed 0x12345678) scrolled by (9, 5) pixels a frame, and the timecode of
IntegrationTests/castkit/bench/timecode.py in the top-left corner (CLOCK_MONOTONIC µs, mod 2**32, frame
counter and check byte; the page's performance.now() is mapped to CLOCK_MONOTONIC by the
caller), so a receiver reads both senders' glass-to-glass latency the same way.

The track: `canvas.captureStream(fps)`, `contentHint` "motion" (or "detail", as Chrome's own
screen sharing), one encoding with `maxBitrate` (4 Mbit/s: spec §7 maxBitrateBps),
`degradationPreference = "maintain-resolution"`, H.264 42e01f packetization-mode=1 preferred
(spec §7; `codec="vp8"`: VP8 first), then Chromium's other codecs.

    sender = CanvasSender(client, page, hint="motion")
    await sender.pair(pin=pin); await sender.wait_approved(); await sender.start()
"""
from __future__ import annotations

import asyncio
import json

from castkit.chromium import Page
from castkit.ref_sender import RefSender
from castkit.trickle import split_candidates

PAGE_JS = """(() => {
  if (window.__cs) return true;
  const W = %(width)d, H = %(height)d, FPS = %(paint_fps)s, MARGIN = 512, COLS = 8, ROWS = 6, CELL = 32;
  const canvas = document.createElement('canvas');
  canvas.width = W; canvas.height = H;
  document.body.appendChild(canvas);
  const g = canvas.getContext('2d');
  // The painter's busy field: (W+512) × (H+512) pixels of random 8×8 blocks.
  const fw = W + MARGIN, fh = H + MARGIN, bw = (fw >> 3) + 1, bh = (fh >> 3) + 1;
  const blocks = new Uint32Array(bw * bh);
  let r = 0x12345678;
  for (let i = 0; i < blocks.length; i++) {
    r = (r ^ (r << 13)) >>> 0; r = (r ^ (r >>> 17)) >>> 0; r = (r ^ (r << 5)) >>> 0;
    blocks[i] = r & 0xFFFFFF;
  }
  const field = document.createElement('canvas');
  field.width = fw; field.height = fh;
  const fg = field.getContext('2d');
  const img = fg.createImageData(fw, fh);
  for (let y = 0; y < fh; y++) for (let x = 0; x < fw; x++) {
    const b = blocks[(y >> 3) * bw + (x >> 3)], o = (y * fw + x) * 4;
    img.data[o] = b >> 16 & 255; img.data[o + 1] = b >> 8 & 255; img.data[o + 2] = b & 255; img.data[o + 3] = 255;
  }
  fg.putImageData(img, 0, 0);
  const cs = window.__cs = { monoOffsetMs: 0, n: 0, pc: null, hint: 'motion', maxBitrate: 4000000, painted: 0 };
  // One frame: the busy field moved by the frame count, or (a quality content set up first by
  // castkit/bench/canvas_content.py) that content at time value v; then the timecode, last.
  cs.drawFrame = (v, f, n) => {
    if (window.__content) window.__content.draw(g, v);
    else g.drawImage(field, (n * 9) %% MARGIN, (n * 5) %% MARGIN, W, H, 0, 0, W, H);
    // timecode.encode: v = µs of CLOCK_MONOTONIC mod 2**32, frame counter, check byte
    const chk = (((v & 255) + ((v >>> 8) & 255) + ((v >>> 16) & 255) + ((v >>> 24) & 255) + f) & 255) ^ 0xA5;
    for (let i = 0; i < COLS * ROWS; i++) {
      const bit = i < 32 ? Math.floor(v / 2 ** i) & 1 : i < 40 ? (f >> (i - 32)) & 1 : (chk >> (i - 40)) & 1;
      g.fillStyle = bit ? '#fff' : '#000';
      g.fillRect((i %% COLS) * CELL, Math.floor(i / COLS) * CELL, CELL, CELL);
    }
  };
  const paint = () => {
    const n = ++cs.n;
    const us = Math.floor((performance.now() + cs.monoOffsetMs) * 1000);
    cs.drawFrame(us %% 4294967296, n & 255, n);
    cs.painted++;
  };
  // The canvas's pixels as base64 RGBA (the tests' read-back), and a stop for its painting.
  cs.pixels = () => {
    const d = g.getImageData(0, 0, W, H).data;
    let s = '';
    for (let i = 0; i < d.length; i += 0x8000) s += String.fromCharCode.apply(null, d.subarray(i, i + 0x8000));
    return btoa(s);
  };
  cs.stopPainting = () => { clearInterval(cs.timer); return true; };
  paint();
  cs.timer = setInterval(paint, 1000 / FPS);
  cs.stream = canvas.captureStream(%(capture_fps)s);
  cs.offer = async (hint, maxBitrate, codec) => {
    if (cs.pc) cs.pc.close();
    const pc = cs.pc = new RTCPeerConnection({ iceServers: [] });
    const track = cs.stream.getVideoTracks()[0];
    track.contentHint = hint;
    const tr = pc.addTransceiver(track, { direction: 'sendonly', streams: [cs.stream],
                                          sendEncodings: [{ maxBitrate }] });
    const codecs = RTCRtpSender.getCapabilities('video').codecs;
    const first = codec === 'vp8' ? codecs.filter(c => c.mimeType === 'video/VP8')
      : codecs.filter(c => c.mimeType === 'video/H264' && /profile-level-id=42e01f/.test(c.sdpFmtpLine || '')
                           && /packetization-mode=1/.test(c.sdpFmtpLine || ''));
    tr.setCodecPreferences(first.concat(codecs.filter(c => !first.includes(c))));
    const p = tr.sender.getParameters();
    p.degradationPreference = 'maintain-resolution';
    await tr.sender.setParameters(p);
    cs.sender = tr.sender;
    await pc.setLocalDescription(await pc.createOffer());
    if (pc.iceGatheringState !== 'complete') {
      await new Promise(res => {
        const t = setTimeout(res, 5000);
        pc.addEventListener('icegatheringstatechange', () => { if (pc.iceGatheringState === 'complete') { clearTimeout(t); res(); } });
      });
    }
    return pc.localDescription.sdp;
  };
  cs.answer = async (sdp) => { await cs.pc.setRemoteDescription({ type: 'answer', sdp }); return true; };
  cs.candidate = async (c) => { await cs.pc.addIceCandidate(c); return true; };
  cs.state = () => cs.pc ? cs.pc.connectionState : 'new';
  cs.outbound = async () => {
    if (!cs.pc) return null;
    const rep = await cs.pc.getStats();
    let out = null;
    rep.forEach(s => { if (s.type === 'outbound-rtp' && s.kind === 'video') out = {
      bytesSent: s.bytesSent, retransmittedBytesSent: s.retransmittedBytesSent, framesEncoded: s.framesEncoded,
      frameWidth: s.frameWidth, frameHeight: s.frameHeight, targetBitrate: s.targetBitrate,
      qualityLimitationReason: s.qualityLimitationReason, encoderImplementation: s.encoderImplementation,
      codecId: s.codecId }; });
    if (out && out.codecId) out.codec = rep.get(out.codecId)?.mimeType;
    return out;
  };
  return true;
})()"""


async def serve_blank_page() -> tuple[str, asyncio.AbstractServer]:
    """An empty HTML page at http://127.0.0.1:<port>/ (and the server): the sender's page must be
    a secure context for --use-fake-ui-for-media-stream's grant to apply, and only with it does
    Chromium put host candidates in its offer. On about:blank it offers none, and a receiver that
    sends no checks of its own first (aiortc) then connects only now and then, through the
    peer-reflexive candidates of Chromium's checks."""
    body = b"<!doctype html><html><head><title>canvas sender</title></head><body></body></html>"

    async def one(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            await r.readuntil(b"\r\n\r\n")
            w.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\nContent-Length: "
                    + str(len(body)).encode() + b"\r\n\r\n" + body)
            await w.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            w.close()

    server = await asyncio.start_server(one, "127.0.0.1", 0)
    return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/", server


def page_js(width: int = 1920, height: int = 1080, paint_fps: float = 30, capture_fps: float = 30) -> str:
    return PAGE_JS % {"width": width, "height": height, "paint_fps": json.dumps(paint_fps),
                      "capture_fps": json.dumps(capture_fps)}


async def map_clock(page: Page) -> float:
    """Sets the page's performance.now() → CLOCK_MONOTONIC offset (ms) from the evaluation with
    the shortest round trip of three; returns that round trip in ms."""
    import time
    best, offset = float("inf"), 0.0
    for _ in range(3):
        t0 = time.monotonic()
        now_ms = await page.evaluate("performance.now()")
        t1 = time.monotonic()
        if t1 - t0 < best:
            best, offset = t1 - t0, (t0 + t1) / 2 * 1000 - now_ms
    await page.evaluate(f"window.__cs.monoOffsetMs = {offset!r}")
    return best * 1000


class CanvasSender(RefSender):
    """RefSender whose peer connection is the page's (libwebrtc), not aiortc's."""

    def __init__(self, client, page: Page, *, hint: str = "motion", max_bitrate: int = 4_000_000,
                 codec: str = "h264", device_name: str = "Chromium canvas sender"):
        super().__init__(client, ice_servers=[], device_name=device_name)
        if codec not in ("h264", "vp8"):
            raise ValueError(f"codec must be h264 or vp8, not {codec!r}")
        self.page, self.hint, self.max_bitrate, self.codec = page, hint, max_bitrate, codec
        self._watch: asyncio.Task | None = None
        self._pc_open = False

    async def negotiate(self, *, candidates_first: bool = False) -> None:
        nid = await self._begin_negotiation()
        sdp = await self.page.evaluate(f"window.__cs.offer({json.dumps(self.hint)}, {int(self.max_bitrate)}, {json.dumps(self.codec)})")
        self._pc_open = True
        sdp, candidates = split_candidates(sdp)
        self.offer_sdp = sdp
        self.event("offer", negotiationId=nid, candidates=len(candidates))
        self.sent_candidates = len(candidates)
        await self.signals.send("offer", {"type": "offer", "sdp": sdp, "negotiationId": nid})
        for c in candidates:
            await self.signals.send("ice_candidate", {"negotiationId": nid, **c})
        await self.signals.send("ice_candidate", {"negotiationId": nid, "endOfCandidates": True})
        if self._watch is None:
            self._watch = asyncio.create_task(self._watch_state())
            self._tasks.append(self._watch)

    async def _watch_state(self) -> None:
        last = None
        while not self.ended.is_set():
            try:
                s = await self.page.evaluate("window.__cs.state()")
            except Exception:  # the page is gone: the sender is closing
                return
            if s != last and self._pc_open:
                last = s
                await self._connection_changed(s)
            await asyncio.sleep(0.2)

    async def _handle_row(self, row: dict) -> None:
        p = row.get("payload") or {}
        t = row.get("message_type")
        if t not in ("answer", "ice_candidate") or p.get("negotiationId") != self.negotiation_id or not self._pc_open:
            # disconnect (RefSender ends the cast); rows of other negotiations (self.pc is None there: ignored)
            await super()._handle_row(row)
        elif t == "answer" and not self.remote_set:
            await self.page.evaluate(f"window.__cs.answer({json.dumps(p['sdp'])})")
            self.remote_set = True
            self.event("answer_applied", negotiationId=self.negotiation_id, buffered=len(self.pending))
            for c in self.pending:
                await self._add_candidate(c)
            self.pending = []
        elif t == "ice_candidate":
            if self.remote_set:
                await self._add_candidate(p)
            else:
                self.pending.append(p)

    async def _add_candidate(self, p: dict) -> None:
        if p.get("endOfCandidates") or not p.get("candidate"):
            return
        c = {k: p[k] for k in ("candidate", "sdpMid", "sdpMLineIndex", "usernameFragment") if k in p}
        await self.page.evaluate(f"window.__cs.candidate({json.dumps(c)})")

    async def _close_pc(self) -> None:
        if self._pc_open:
            self._pc_open = False
            try:
                await self.page.evaluate("(() => { window.__cs.pc?.close(); window.__cs.pc = null; return true; })()")
            except Exception:  # the page is gone already
                pass

    async def outbound(self) -> dict | None:
        """The page's outbound-rtp video stats (bytes sent, target bitrate, encoder, limitation)."""
        return await self.page.evaluate("window.__cs.outbound()")
