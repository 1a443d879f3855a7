"""GStreamer's webrtcbin as the receiver: the receiver side of the contract (castkit/
receiver_answerer.ReceiverAnswerer: answer each offer, trickle, buffer early candidates,
ignore other negotiations), with a webrtcbin peer instead of aiortc's. NACKs on (the
transceiver's do-nack, as a webrtcbin receiver in the field), the H.264 depayloaded and
parsed into access units that are counted, not decoded.

webrtcbin NACKs packets that are merely late (2–30 ms, issue 14), so it is the receiver that
shows whether a sender treats NACKs it ignored, or late packets, as loss.

Run it only inside a network namespace without a route off the machine (Scripts/faults does):
libnice, webrtcbin's ICE agent, multicasts UPnP/SSDP discovery (239.255.255.250) on every
interface by default.

    rx = WebrtcbinAnswerer(receiver_client, session_id)
    await rx.start()
    await rx.wait_frames(100)            # access units, not decoded frames
    rx.access_units, rx.nacks_sent()
"""
from __future__ import annotations

import asyncio
import re
import sys
import time
from pathlib import Path

from castkit.bench.gst import Gst  # (Debian's GStreamer bindings, initialised)
from castkit.bench.gst_sender import ecdsa_identity
from castkit.receiver_answerer import ReceiverAnswerer
from castkit.trickle import add_remote_candidate

import gi

gi.require_version("GstWebRTC", "1.0")
gi.require_version("GstSdp", "1.0")
from gi.repository import GstSdp, GstWebRTC  # noqa: E402


def session_sent_nacks(sess) -> int | None:
    """Generic NACKs sent, summed over one RTPSession's sources (None when no source says).
    The per-source structures are borrowed from the session's "stats" structure, so it is
    held in a variable while they are read: read through a temporary (one expression), they
    were read after it was freed, and the receiver segfaulted in gst_structure_get_uint in
    about one run of three (IntegrationTests/faults/test_webrtcbin_stats.py)."""
    total = None
    stats = sess.get_property("stats")
    for src_stats in stats.get_value("source-stats") or []:
        ok, n = src_stats.get_uint("sent-nack-count")
        if ok:
            total = (total or 0) + n
    return total


class WebrtcbinPeer:
    """One webrtcbin pipeline answering one offer. `addIceCandidate` takes what
    castkit/trickle.add_remote_candidate hands an aiortc peer, so the answerer's row loop
    applies remote candidates to either."""

    def __init__(self, owner: "WebrtcbinAnswerer", loop: asyncio.AbstractEventLoop):
        self.owner, self.loop = owner, loop
        self.pipe = Gst.Pipeline.new("webrtcbin-receiver")
        self.fingerprint = ecdsa_identity(self.pipe)     # ECDSA, as WebRTC peers use
        self.wb = Gst.ElementFactory.make("webrtcbin", "wb")
        self.wb.set_property("bundle-policy", GstWebRTC.WebRTCBundlePolicy.MAX_BUNDLE)
        self.pipe.add(self.wb)
        self.candidates: list[tuple[int, str]] = []
        self.gathered = asyncio.Event()
        self.new_candidate = asyncio.Event()
        self.wb.connect("on-new-transceiver", lambda _wb, t: t.set_property("do-nack", True))
        self.wb.connect("pad-added", self._on_pad)
        self.wb.connect("on-ice-candidate", lambda _wb, m, c: loop.call_soon_threadsafe(self._candidate, m, c))
        self.wb.connect("notify::ice-gathering-state", self._on_gathering)
        self.pipe.set_state(Gst.State.PLAYING)

    def _candidate(self, mline: int, text: str) -> None:
        self.candidates.append((mline, text))
        self.new_candidate.set()

    def _on_gathering(self, wb, _pspec) -> None:
        if wb.get_property("ice-gathering-state") == GstWebRTC.WebRTCICEGatheringState.COMPLETE:
            self.loop.call_soon_threadsafe(self.gathered.set)

    def _on_pad(self, wb, pad) -> None:
        if pad.get_direction() != Gst.PadDirection.SRC:
            return
        tail = Gst.parse_bin_from_description(
            "queue ! rtph264depay ! h264parse ! video/x-h264,alignment=au ! fakesink name=au signal-handoffs=true sync=false",
            True)
        self.pipe.add(tail)
        tail.get_by_name("au").connect("handoff", lambda *_: self.loop.call_soon_threadsafe(self.owner.access_unit))
        tail.sync_state_with_parent()
        pad.link(tail.get_static_pad("sink"))

    async def answer(self, offer_sdp: str) -> str:
        """set-remote-description(offer), create-answer, set-local-description: the answer's
        text, with the fingerprint of the certificate the handshake presents."""
        done: asyncio.Future = self.loop.create_future()

        def resolve(value) -> None:
            self.loop.call_soon_threadsafe(lambda: done.done() or done.set_result(value))

        def failed(step: str, reply) -> None:
            err = reply.get_value("error") if reply and reply.has_field("error") else None
            text = f"webrtcbin {step}: {err.message if err else reply.to_string() if reply else 'no reply'}"
            self.loop.call_soon_threadsafe(lambda: done.done() or done.set_exception(RuntimeError(text)))

        def on_answer(promise, _):
            reply = promise.get_reply()
            a = reply.get_value("answer") if reply and reply.has_field("answer") else None
            if a is None:
                return failed("create-answer", reply)
            self.wb.emit("set-local-description", a, Gst.Promise.new())
            resolve(a.sdp.as_text())

        def on_remote(promise, _):
            reply = promise.get_reply()
            if reply is not None and reply.has_field("error"):
                return failed("set-remote-description", reply)
            self.wb.emit("create-answer", None, Gst.Promise.new_with_change_func(on_answer, None))

        _, msg = GstSdp.SDPMessage.new_from_text(offer_sdp)
        offer = GstWebRTC.WebRTCSessionDescription.new(GstWebRTC.WebRTCSDPType.OFFER, msg)
        self.wb.emit("set-remote-description", offer, Gst.Promise.new_with_change_func(on_remote, None))
        sdp = await asyncio.wait_for(done, 20)
        return re.sub(r"^a=fingerprint:.*$", "a=fingerprint:" + self.fingerprint, sdp, flags=re.M)

    async def addIceCandidate(self, c) -> None:  # noqa: N802 (aiortc's name: see the class doc)
        if c is None:
            return
        from aiortc.sdp import candidate_to_sdp
        self.wb.emit("add-ice-candidate", int(c.sdpMLineIndex or 0), "candidate:" + candidate_to_sdp(c))

    def nacks_sent(self) -> int | None:
        """Generic NACKs this receiver sent, from its rtpbin's session statistics (None if absent)."""
        total = None
        it = self.pipe.iterate_recurse()
        while True:
            ok, el = it.next()
            if ok != Gst.IteratorResult.OK:
                break
            if el.get_factory() and el.get_factory().get_name() == "rtpbin":
                for i in range(4):
                    sess = el.emit("get-internal-session", i)
                    if sess is None:
                        continue
                    n = session_sent_nacks(sess)
                    if n is not None:
                        total = (total or 0) + n
        return total

    def stop(self) -> None:
        self.pipe.set_state(Gst.State.NULL)


class WebrtcbinAnswerer(ReceiverAnswerer):
    def __init__(self, client, session_id: str):
        super().__init__(client, session_id, keep_frames=0)
        self.nacks: int | None = None

    @property
    def access_units(self) -> int:
        return len(self.frames)

    def access_unit(self) -> None:
        """One H.264 access unit arrived: counted as a frame (ReceiverAnswerer.wait_frames waits on them)."""
        self.frames.append(time.monotonic())
        self.frame_event.set()

    async def _answer(self, offer: dict) -> None:
        nid = offer["negotiationId"]
        self.answered.add(nid)
        await self._close_pc()
        self.negotiation_id = nid
        self.remote_set = False
        peer = WebrtcbinPeer(self, asyncio.get_running_loop())
        self.pc = peer
        sdp = await peer.answer(offer["sdp"])
        self.remote_set = True
        for c in self.pending.pop(nid, []):
            await add_remote_candidate(peer, c)
        mid = next((l[len("a=mid:"):] for l in sdp.splitlines() if l.startswith("a=mid:")), "0")
        sdp = "\r\n".join(l for l in sdp.splitlines() if not l.startswith("a=candidate:")) + "\r\n"
        await self.signals.send("answer", {"type": "answer", "sdp": sdp, "negotiationId": nid})
        self._tasks.append(asyncio.create_task(self._trickle(peer, nid, mid)))

    async def _trickle(self, peer: WebrtcbinPeer, nid: str, mid: str) -> None:
        sent = 0
        while self.pc is peer:
            while sent < len(peer.candidates):
                mline, text = peer.candidates[sent]
                sent += 1
                await self.signals.send("ice_candidate", {"negotiationId": nid, "candidate": text, "sdpMid": mid,
                                                          "sdpMLineIndex": mline})
            if peer.gathered.is_set() and sent == len(peer.candidates):
                await self.signals.send("ice_candidate", {"negotiationId": nid, "endOfCandidates": True})
                return
            peer.new_candidate.clear()
            try:
                await asyncio.wait_for(peer.new_candidate.wait(), 0.5)
            except asyncio.TimeoutError:
                pass

    async def _close_pc(self) -> None:
        if self.pc is not None:
            peer, self.pc = self.pc, None
            try:
                self.nacks = peer.nacks_sent()
            except Exception:  # statistics are best effort
                self.nacks = None
            await asyncio.get_running_loop().run_in_executor(None, peer.stop)


async def _main() -> int:
    """The receiver role as a process of its own (GStreamer in a process that already runs
    other native libraries has crashed: Scripts/faults runs it this way). Creates a session,
    prints {"sessionId", "pin"}, approves the join request, answers with webrtcbin; prints
    {"started": true} at the first `--warmup` access units, then after `--seconds`
    {"access_units", "seconds", "per_s", "nacks_sent"} and ends."""
    import argparse
    import faulthandler
    import json
    faulthandler.enable()     # a native crash leaves every thread's Python stack in receiver.log
    from castkit.castd_proc import Receiver
    from castkit.signaling import StackConfig
    ap = argparse.ArgumentParser(description=_main.__doc__)
    ap.add_argument("--seconds", type=float, default=25)
    ap.add_argument("--warmup", type=int, default=30)
    a = ap.parse_args()
    cfg = StackConfig.from_env()

    def out(obj: dict) -> None:
        print(json.dumps(obj), flush=True)

    stack = type("Stack", (), {"api_url": cfg.api_url, "supabase_url": cfg.supabase_url, "key": cfg.supabase_key})
    rx = Receiver(stack)
    s = await rx.create()
    out({"sessionId": s["sessionId"], "pin": s["pin"]})
    answerer = WebrtcbinAnswerer(rx.client, s["sessionId"])
    try:
        await rx.wait_pairing_then(True, {"autoQuality": True, "resolution": "1080p", "frameRate": 30}, timeout=60)
        await answerer.start()
        await answerer.wait_frames(a.warmup, timeout=60)
        n0, t0 = answerer.access_units, time.monotonic()
        out({"started": True})
        await asyncio.sleep(a.seconds)
        n1, t1 = answerer.access_units, time.monotonic()
        nacks = answerer.pc.nacks_sent() if answerer.pc else None
        out({"access_units": n1 - n0, "seconds": round(t1 - t0, 2), "per_s": round((n1 - n0) / (t1 - t0), 1),
             "nacks_sent": nacks})
    finally:
        await answerer.close()
        await rx.client.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(_main()))
