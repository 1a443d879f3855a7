"""A GStreamer WebRTC sender glued to the local stack's signaling, for the bench.

    CASTD_API_URL=… CASTD_SUPABASE_URL=… CASTD_SUPABASE_KEY=… \\
        python IntegrationTests/castkit/bench/gst_sender.py --pin 482913 --display :50 --width 1920 --height 1080

It pairs, waits for approval, offers and trickles exactly as castd does,
reusing the reference sender (IntegrationTests/castkit/ref_sender.py) for
everything but the media: instead of aiortc, each negotiation builds

    ximagesrc ! videoconvert [! videoscale] ! I420 BT.709 30 fps
      ! x264enc (castd's settings: gst.x264) ! rtph264pay (1200-byte MTU)
      ! webrtcbin (max-bundle, send-only)

or with --codec vp8: I420 BT.601 ! vp8enc (castd's settings: gst.vp8)
! rtpvp8pay (15-bit PictureID, 1200-byte MTU) ! webrtcbin, offering VP8 alone.
With --audio SINK, a second, send-only m-line carries desktop audio as castd
sends it (gst.opus: the PipeWire sink's monitor ! opusenc ! rtpopuspay), in
the same bundle.

and its offer is sent as the offer row, each candidate it gathers as one
ice_candidate row, then endOfCandidates. The capture starts on approval,
as castd's does. Prints "waiting" once subscribed (the bench approves
then), and lines "event …" as things happen. Stops on SIGTERM.
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import logging
import os
import re
import signal
import ssl
import sys
import threading
from pathlib import Path

from castkit.bench import gst
from castkit.bench.gst import Gst
from castkit.ref_sender import Denied, RefSender
from castkit.signaling import StackClient, StackConfig

import gi

gi.require_version("GstWebRTC", "1.0")
gi.require_version("GstSdp", "1.0")
from gi.repository import GstSdp, GstWebRTC  # noqa: E402

log = logging.getLogger("gst_sender")

STATES = {GstWebRTC.WebRTCPeerConnectionState.NEW: "new",
          GstWebRTC.WebRTCPeerConnectionState.CONNECTING: "connecting",
          GstWebRTC.WebRTCPeerConnectionState.CONNECTED: "connected",
          GstWebRTC.WebRTCPeerConnectionState.DISCONNECTED: "disconnected",
          GstWebRTC.WebRTCPeerConnectionState.FAILED: "failed",
          GstWebRTC.WebRTCPeerConnectionState.CLOSED: "closed"}


def ecdsa_pem() -> str:
    """A throwaway self-signed P-256 certificate and its key, PEM. GStreamer's DTLS
    makes an RSA certificate, but WebRTC peers (aiortc, the bench's receiver,
    and Chrome by default) use ECDSA; aiortc offers only ECDHE-ECDSA ciphers."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gst-bench-sender")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30)).sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM)
            + key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption())).decode()


def ecdsa_identity(pipe) -> str:
    """Gives the DTLS elements of a webrtcbin pipeline an ECDSA certificate (ecdsa_pem);
    returns its SDP fingerprint ("sha-256 AB:CD:…"), which the caller puts in its description."""
    pem = ecdsa_pem()
    der = ssl.PEM_cert_to_DER_cert(pem[:pem.index("-----END CERTIFICATE-----") + 25])
    pipe.connect("deep-element-added",
                 lambda _bin, _sub, el: el.get_factory() and el.get_factory().get_name() == "dtlsdec"
                 and el.set_property("pem", pem))
    return "sha-256 " + ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())


class GstPeer:
    """One webrtcbin pipeline; its callbacks (GStreamer threads) are handed to the asyncio loop."""

    def __init__(self, sender: "GstSender", loop: asyncio.AbstractEventLoop, stun: str | None):
        self.sender, self.loop = sender, loop
        s = sender
        _, _, kbps = gst.cap(s.width, s.height)
        if s.codec == "vp8":
            desc = (gst.source(s.display, s.width, s.height, use_damage=True, colorimetry="bt601") + f" ! {gst.vp8(kbps)}"
                    " ! rtpvp8pay mtu=1200 picture-id-mode=15-bit pt=96"
                    " ! application/x-rtp,media=video,encoding-name=VP8,payload=96,clock-rate=90000"
                    " ! webrtcbin name=wb bundle-policy=max-bundle")
        else:
            desc = (gst.source(s.display, s.width, s.height, use_damage=True) + f" ! {gst.x264(kbps)}"
                    " ! rtph264pay config-interval=-1 mtu=1200 aggregate-mode=zero-latency pt=96"
                    " ! application/x-rtp,media=video,encoding-name=H264,payload=96,clock-rate=90000"
                    " ! webrtcbin name=wb bundle-policy=max-bundle")
        if s.audio_sink:
            desc += f" {gst.opus(s.audio_sink)} ! wb."
        self.pipe = Gst.parse_launch(desc)
        # webrtcbin's SDP keeps the fingerprint of the certificate it generated: the offer
        # carries this one's instead (negotiate), which is the one the handshake presents.
        self.fingerprint = ecdsa_identity(self.pipe)
        self.wb = self.pipe.get_by_name("wb")
        if stun:
            self.wb.set_property("stun-server", stun)
        self.offer_ready: asyncio.Future = loop.create_future()
        self.gathered = asyncio.Event()
        self.wb.connect("on-negotiation-needed", self._on_negotiation_needed)
        self.wb.connect("on-ice-candidate", self._on_ice_candidate)
        self.wb.connect("notify::ice-gathering-state", self._on_gathering)
        self.wb.connect("notify::connection-state", self._on_state)

    def start(self) -> None:
        for i in range(2 if self.sender.audio_sink else 1):   # video, then audio
            t = self.wb.emit("get-transceiver", i)
            if t is not None:
                t.set_property("direction", GstWebRTC.WebRTCRTPTransceiverDirection.SENDONLY)
        self.pipe.set_state(Gst.State.PLAYING)

    def stop(self) -> None:
        self.pipe.set_state(Gst.State.NULL)

    # GStreamer threads ------------------------------------------------------

    def _on_negotiation_needed(self, wb):
        def on_offer(promise, _):
            reply = promise.get_reply()
            offer = reply.get_value("offer")
            wb.emit("set-local-description", offer, Gst.Promise.new())
            text = offer.sdp.as_text()
            self.loop.call_soon_threadsafe(lambda: self.offer_ready.done() or self.offer_ready.set_result(text))
        wb.emit("create-offer", None, Gst.Promise.new_with_change_func(on_offer, None))

    def _on_ice_candidate(self, wb, mline, candidate):
        self.loop.call_soon_threadsafe(self.sender.local_candidate, self, mline, candidate)

    def _on_gathering(self, wb, _pspec):
        if wb.get_property("ice-gathering-state") == GstWebRTC.WebRTCICEGatheringState.COMPLETE:
            self.loop.call_soon_threadsafe(self.gathered.set)

    def _on_state(self, wb, _pspec):
        s = STATES.get(wb.get_property("connection-state"), "new")
        self.loop.call_soon_threadsafe(self.sender.peer_state, self, s)

    # asyncio side -----------------------------------------------------------

    def set_answer(self, sdp: str) -> None:
        ok, msg = GstSdp.SDPMessage.new_from_text(sdp)
        answer = GstWebRTC.WebRTCSessionDescription.new(GstWebRTC.WebRTCSDPType.ANSWER, msg)
        self.wb.emit("set-remote-description", answer, Gst.Promise.new())

    def add_candidate(self, payload: dict) -> None:
        text = payload.get("candidate") or ""
        if payload.get("endOfCandidates") or not text:
            return
        if not text.startswith("candidate:"):
            text = "candidate:" + text
        self.wb.emit("add-ice-candidate", int(payload.get("sdpMLineIndex") or 0), text)


class GstSender(RefSender):
    """RefSender's signaling (pair, approval, offer/answer rows, §11 reconnects) with a GStreamer peer."""

    def __init__(self, client: StackClient, *, display: str, width: int, height: int, codec: str = "h264",
                 audio_sink: str | None = None):
        super().__init__(client, width=width, height=height, ice_servers=None, device_name="GStreamer sender")
        self.display = display
        self.codec = codec
        self.audio_sink = audio_sink   # a PipeWire sink whose monitor is sent as Opus (None: video only)
        self.peer: GstPeer | None = None
        self.mid = "video0"
        self.early: list[tuple] | None = None   # candidates gathered before the offer row went out
        self.row_lock = asyncio.Lock()          # candidate rows, then endOfCandidates, in order

    def _stun(self) -> str | None:
        for s in self.ice_servers or []:
            urls = s.get("urls")
            for u in [urls] if isinstance(urls, str) else urls or []:
                if u.startswith("stun:"):
                    return "stun://" + u[len("stun:"):]
        return None

    async def negotiate(self, *, candidates_first: bool = False) -> None:
        nid = await self._begin_negotiation()
        self.early = []
        self.peer = peer = GstPeer(self, asyncio.get_running_loop(), self._stun())
        self.pc = peer          # RefSender routes answer/candidate rows while self.pc is set
        peer.start()
        sdp = await asyncio.wait_for(peer.offer_ready, 20)
        if self.codec == "h264":
            sdp = h264_fmtp(sdp)
        sdp = re.sub(r"^a=fingerprint:.*$", "a=fingerprint:" + peer.fingerprint, sdp, flags=re.M)
        sdp = "\r\n".join(l for l in sdp.splitlines() if not l.startswith("a=candidate:")) + "\r\n"
        self.offer_sdp = sdp
        self.mid = _mid_of(sdp)
        self.event("offer", negotiationId=nid)
        log.debug("offer sdp:\n%s", sdp)
        await self.signals.send("offer", {"type": "offer", "sdp": sdp, "negotiationId": nid})
        early, self.early = self.early or [], None
        for mline, candidate in early:
            await self._send_candidate(nid, mline, candidate)
        self._trickle = asyncio.create_task(self._end_of_candidates(peer, nid))

    async def _end_of_candidates(self, peer: GstPeer, nid: str) -> None:
        await peer.gathered.wait()
        await asyncio.sleep(0)      # candidate sends scheduled before the state change take the lock first
        async with self.row_lock:
            if self.peer is peer:
                await self.signals.send("ice_candidate", {"negotiationId": nid, "endOfCandidates": True})

    def local_candidate(self, peer: GstPeer, mline: int, candidate: str) -> None:
        if peer is not self.peer:
            return
        if self.early is not None:
            self.early.append((mline, candidate))
        else:
            asyncio.ensure_future(self._send_candidate(self.negotiation_id, mline, candidate))

    async def _send_candidate(self, nid: str, mline: int, candidate: str) -> None:
        self.sent_candidates += 1
        async with self.row_lock:
            await self.signals.send("ice_candidate", {"negotiationId": nid, "candidate": candidate,
                                                      "sdpMid": self.mid, "sdpMLineIndex": mline})

    def peer_state(self, peer: GstPeer, state: str) -> None:
        if peer is self.peer:
            asyncio.ensure_future(self._connection_changed(state))

    async def _handle_row(self, row: dict) -> None:
        p = row.get("payload") or {}
        t = row.get("message_type")
        if t in ("answer", "ice_candidate") and self.peer is not None and p.get("negotiationId") == self.negotiation_id:
            if t == "answer" and not self.remote_set:
                self.peer.set_answer(p["sdp"])
                self.remote_set = True
                self.event("answer_applied", negotiationId=self.negotiation_id, buffered=len(self.pending))
                for c in self.pending:
                    self.peer.add_candidate(c)
                self.pending = []
            elif t == "ice_candidate":
                if self.remote_set:
                    self.peer.add_candidate(p)
                else:
                    self.pending.append(p)
            return
        await super()._handle_row(row)

    async def _close_pc(self) -> None:
        if self.peer is not None:
            peer, self.peer, self.pc = self.peer, None, None
            await asyncio.get_running_loop().run_in_executor(None, peer.stop)


def h264_fmtp(sdp: str, pt: int = 96) -> str:
    """spec §7: the offer names Constrained Baseline 42e01f with packetization-mode=1.
    webrtcbin writes the fmtp from the payloader's caps, which it may not have yet when
    it makes the offer (no fmtp line at all), and names the level from the SPS: the
    line is completed here, keeping sprop-parameter-sets when present."""
    lines = sdp.split("\r\n") if "\r\n" in sdp else sdp.split("\n")
    params: dict[str, str] = {}
    at = next(i for i, l in enumerate(lines) if l.startswith(f"a=rtpmap:{pt} "))
    for i, l in enumerate(lines):
        if l.startswith(f"a=fmtp:{pt} "):
            params = dict(kv.split("=", 1) for kv in l.split(" ", 1)[1].split(";") if "=" in kv)
            del lines[i]
            at = i - 1
            break
    params |= {"packetization-mode": "1", "profile-level-id": "42e01f", "level-asymmetry-allowed": "1"}
    lines.insert(at + 1, f"a=fmtp:{pt} " + ";".join(f"{k}={v}" for k, v in params.items()))
    return "\r\n".join(lines)


def _mid_of(sdp: str) -> str:
    m = re.search(r"^a=mid:(\S+)", sdp, re.M)
    return m.group(1) if m else "video0"


async def _main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pin", required=True)
    ap.add_argument("--display", required=True)
    ap.add_argument("--width", type=int, required=True)
    ap.add_argument("--height", type=int, required=True)
    ap.add_argument("--codec", choices=("h264", "vp8"), default="h264")
    ap.add_argument("--audio", metavar="SINK", help="also send this PipeWire sink's monitor as Opus (castd's settings)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.DEBUG if os.environ.get("BENCH_DEBUG") else logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with StackClient(StackConfig.from_env()) as client:
        s = GstSender(client, display=args.display, width=args.width, height=args.height, codec=args.codec,
                      audio_sink=args.audio)
        sid = await s.pair(pin=args.pin)
        print(f"waiting {sid}", flush=True)
        try:
            await s.wait_approved(timeout=120)
        except Denied:
            await s.close()
            return 2
        await s.start()
        stopper, ended = asyncio.create_task(stop.wait()), asyncio.create_task(s.ended.wait())
        await asyncio.wait({stopper, ended}, return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        ended.cancel()
        await s.stop()
        print(f"ended: {s.end_reason or 'stopped'}", flush=True)
        return 0


if __name__ == "__main__":
    threading.current_thread().name = "main"
    sys.exit(asyncio.run(_main()))
