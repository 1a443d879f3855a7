"""The long TURN row (not for CI; CASTD_TURN_LONG=1 runs it, about 3.5 minutes): a cast of
3 minutes through coturn whose allocations last only 60 s and whose nonces go stale
after 45 s (so refreshes meet 438 Stale Nonce and retry with the new nonce). castd must refresh each
allocation before it expires (at half the lifetime for lifetimes of 2 minutes or less),
coturn's log must show the refreshes, and the receiver must never go a second without
a frame.
"""
import asyncio
import os
import re
import time

import pytest
from aiortc import RTCConfiguration, RTCIceServer, RTCPeerConnection, RTCSessionDescription

from castkit.turn_world import TURN_IP, TURN_PORT, NamedNetns, TurnWorld, start_sender

MINUTES = float(os.environ.get("CASTD_TURN_LONG_MINUTES", "3"))
pytestmark = [
    pytest.mark.skipif(os.environ.get("CASTD_TURN_LONG") != "1", reason="long row: CASTD_TURN_LONG=1"),
    pytest.mark.skipif(TurnWorld.available() is not None, reason=TurnWorld.available() or ""),
]


@pytest.mark.timeout(int(MINUTES * 60) + 90)
async def test_a_three_minute_cast_survives_60_second_allocations(bars_clip):
    seconds = MINUTES * 60
    with TurnWorld(lifetime=60, stale_nonce=45) as world:
        user, credential = world.credentials()
        sender = await start_sender(world, bars_clip, user, credential, "--fps", "30", "--seconds", str(seconds + 10))
        pc = RTCPeerConnection(RTCConfiguration(iceServers=[RTCIceServer(urls=f"stun:{TURN_IP}:{TURN_PORT}")]))
        arrivals: list[float] = []

        @pc.on("track")
        def on_track(track):
            async def pull():
                while True:
                    try:
                        await track.recv()
                    except Exception:
                        return
                    arrivals.append(time.monotonic())
            asyncio.ensure_future(pull())

        try:
            offer = await sender.next("offer", timeout=15)
            with NamedNetns(world.ns["r"]).entered():
                await pc.setRemoteDescription(RTCSessionDescription(sdp=offer["sdp"], type="offer"))
                await pc.setLocalDescription(await pc.createAnswer())
            await sender.send(type="answer", sdp=pc.localDescription.sdp)
            fwd = asyncio.create_task(sender.forward_candidates(pc))
            await asyncio.sleep(seconds)          # the length of the row, not a race
            fwd.cancel()
        finally:
            await pc.close()
            await sender.stop()
        assert arrivals, "no frame arrived"
        span = arrivals[-1] - arrivals[0]
        gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
        log = world.coturn_log()
        refreshes = len(re.findall(r"refreshed, .*lifetime=60", log))
        stale = log.count("438")
        pairs = [m for m in sender.log if m["type"] == "selectedPair"]
        print(f"TURN long row: {len(arrivals)} frames over {span:.1f} s ({len(arrivals) / span:.1f} fps), "
              f"longest gap {max(gaps) * 1000:.0f} ms, coturn refreshes {refreshes}, 438 answers {stale}, pairs {pairs}")
        assert pairs and pairs[-1]["localType"] == "relay"
        assert span >= seconds - 15
        assert max(gaps) < 1.0
        # One refresh per 30 s over the whole row (60 s lifetime, refreshed at half).
        assert refreshes >= int(seconds / 30) - 1
