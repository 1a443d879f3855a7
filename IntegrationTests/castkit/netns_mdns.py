"""Runs inside a network namespace of its own (test_mdns.py starts it with `ip netns exec`),
so no multicast leaves the machine: loopback only, plus 10.99.0.1 on it as the receiver's
host address. castd dev-send offers; aiortc answers; the aiortc host candidate is signalled
as Chrome would, `<uuid>.local`, and a multicast DNS responder on loopback owns that name
(mode `answer`: answers queries; `announce`: announces it before the candidate is signalled
and answers nothing, as Chromium does here; `silent`: neither; `blocked`: no responder, and
port 5353 is held exclusively by another socket, so castd cannot listen). Prints one JSON line."""
import asyncio
import json
import socket
import subprocess
import sys
import uuid
from pathlib import Path

from aiortc import RTCPeerConnection, RTCSessionDescription

from castkit.devsender import DevSender
from castkit.mdns_responder import MDNSResponder, group_users

RECEIVER_IP = "10.99.0.1"


async def main(clip: str, mode: str) -> dict:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    subprocess.run(["ip", "addr", "add", f"{RECEIVER_IP}/32", "dev", "lo"], check=True)
    blockers = []
    if mode == "blocked":
        # Without SO_REUSEADDR/SO_REUSEPORT these own the port: castd's bind fails.
        for family in (socket.AF_INET, socket.AF_INET6):
            b = socket.socket(family, socket.SOCK_DGRAM)
            if family == socket.AF_INET6:
                b.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            b.bind(("0.0.0.0" if family == socket.AF_INET else "::", 5353))
            blockers.append(b)
    responder = await MDNSResponder("127.0.0.1", answer=(mode == "answer"), announce=(mode == "announce")).start() \
        if mode != "blocked" else None
    members_before = group_users("lo")   # the responder's membership, before castd runs
    sender = await DevSender.start(Path(clip), "--fps", "30", "--seconds", "30")
    pc = RTCPeerConnection()
    frames = 0
    enough = asyncio.Event()

    @pc.on("track")
    def on_track(track):
        async def pull():
            nonlocal frames
            while True:
                try:
                    await track.recv()
                except Exception:
                    return
                frames += 1
                if frames >= 30:
                    enough.set()
        asyncio.ensure_future(pull())

    name = f"{uuid.uuid4()}.local"
    try:
        offer = await sender.next("offer")
        await pc.setRemoteDescription(RTCSessionDescription(sdp=offer["sdp"], type="offer"))
        await pc.setLocalDescription(await pc.createAnswer())
        lines = pc.localDescription.sdp.split("\r\n")
        host = [l for l in lines if l.startswith("a=candidate:") and f" {RECEIVER_IP} " in l and " typ host" in l]
        assert host, lines
        # Chrome's way: no address in the SDP, the host candidate behind a `.local` name.
        answer = "\r\n".join(l for l in lines if not l.startswith("a=candidate:") and l != "a=end-of-candidates")
        await sender.send(type="answer", sdp=answer)
        if responder:
            responder.register(name, RECEIVER_IP)
        await asyncio.sleep(0.2)   # the announcement is on the wire before the candidate is signalled
        await sender.send(type="candidate", candidate=host[0][2:].replace(f" {RECEIVER_IP} ", f" {name} "))
        await sender.send(type="endOfCandidates")

        fwd = asyncio.create_task(sender.forward_candidates(pc))
        try:
            try:
                await asyncio.wait_for(enough.wait(), 25)
            except asyncio.TimeoutError:
                pass   # reported: frames < 30
            if mode == "silent":
                # The name is given up after 5 s; the stats after that show it.
                await asyncio.sleep(6)
            else:
                await asyncio.sleep(1.5)   # one more stats line after the media flows
            members_during = group_users("lo")
        finally:
            fwd.cancel()
    finally:
        await pc.close()
        rc = await sender.stop()
        members_after = group_users("lo")   # castd gone, the responder still up
        if responder:
            responder.close()
        for b in blockers:
            b.close()
    log = sender.log
    return {
        "exit": rc, "frames": frames, "mode": mode, "receiver_ip": RECEIVER_IP,
        "listening": [m for m in log if m["type"] in ("mdnsListening", "mdnsUnavailable")],
        "resolved": [m for m in log if m["type"] == "mdnsResolved"],
        "unresolved": [m for m in log if m["type"] == "mdnsUnresolved"],
        "selected": [m for m in log if m["type"] == "selectedPair"],
        "stats": sender.stats(),
        "queries_heard": responder.queries_heard.get(name, 0) if responder else 0,
        "responses_sent": responder.responses_sent if responder else 0,
        # castd's own group memberships on lo while it cast and after it exited, per the kernel.
        "castd_joined": {k: members_during[k] - members_before[k] for k in members_before},
        "castd_joined_after_exit": {k: members_after[k] - members_before[k] for k in members_before},
        "tail": log[-12:] if frames < 30 else [],
    }


if __name__ == "__main__":
    result = asyncio.run(main(sys.argv[1], sys.argv[2]))
    print("RESULT " + json.dumps(result), flush=True)
