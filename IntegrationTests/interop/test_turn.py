"""castd's relay candidates against a real coturn, across two symmetric NATs with no
direct path (turn_world.py): the cast can only flow through the TURN allocation.

castd (dev-send) offers from its namespace with only a TURN server configured; aiortc
answers from the other namespace with only coturn as its STUN server (its
server-reflexive candidate is the receiver's NAT mapping). The test checks castd's
selected pair is `relay`, pixels of the SMPTE bars arrive, and that coturn saw the
allocation; that wrong credentials give a sentence naming the server; and that with them
the cast goes on over a direct path where one exists.
"""
import subprocess

import pytest
from aiortc import RTCConfiguration, RTCIceServer, RTCPeerConnection

from castkit.devsender import BARS, DevSender, answer_with_aiortc, assert_sent_cleanly, bar_colours
from castkit.turn_world import REALM, TURN_IP, TURN_PORT, TURN_URL, NamedNetns, TurnWorld, answer_from, start_sender

pytestmark = pytest.mark.skipif(TurnWorld.available() is not None, reason=TurnWorld.available() or "")


@pytest.mark.timeout(60)
async def test_a_cast_across_two_symmetric_nats_flows_through_coturn(bars_clip):
    with TurnWorld() as world:
        user, credential = world.credentials()
        sender = await start_sender(world, bars_clip, user, credential, "--fps", "30", "--seconds", "20")
        pc = None
        try:
            pc, frames = await answer_from(world, sender, frames_wanted=60)
            last = frames[-1]
            assert last.shape == (360, 640, 3)
            for got, want in zip(bar_colours(last), BARS):
                assert max(abs(g - w) for g, w in zip(got, want)) <= 12, (got, want)
            relay = [m for m in sender.log if m["type"] == "candidate" and " typ relay" in m["candidate"]]
            assert len(relay) == 1, sender.log
            assert f" {TURN_IP} " in relay[0]["candidate"]
            pairs = [m for m in sender.log if m["type"] == "selectedPair"]
            assert pairs and pairs[-1]["localType"] == "relay", pairs
            # endOfCandidates only after the relay candidate was trickled.
            assert sender.log.index(relay[0]) < [m["type"] for m in sender.log].index("endOfCandidates")
        finally:
            if pc:
                await pc.close()
            rc = await sender.stop()
        assert_sent_cleanly(sender, rc, frames=60)
        log = world.coturn_log()
        # coturn's own account: the allocation, the permission, the channel, and the release.
        assert "ALLOCATE processed, success" in log, log[-3000:]
        assert "CREATE_PERMISSION processed, success" in log, log[-3000:]
        assert "CHANNEL_BIND processed, success" in log, log[-3000:]


@pytest.mark.timeout(30)
async def test_wrong_turn_credentials_give_a_sentence_naming_the_server(bars_clip):
    with TurnWorld() as world:
        user, credential = world.credentials(secret="not-the-secret")
        sender = await start_sender(world, bars_clip, user, credential, "--seconds", "10")
        try:
            failed = await sender.next("relayFailed", timeout=10)
            await sender.next("endOfCandidates", timeout=5)
        finally:
            await sender.stop()
        assert failed["server"] == TURN_URL
        assert TURN_URL in failed["message"]
        assert "credentials" in failed["message"]
        assert credential not in failed["message"] and user not in failed["message"]
        assert not any(m["type"] == "candidate" and " typ relay" in m["candidate"] for m in sender.log)
        assert REALM in world.coturn_log() or "401" in world.coturn_log()


@pytest.mark.timeout(45)
async def test_with_wrong_turn_credentials_the_cast_goes_on_over_a_direct_path(bars_clip):
    # castd and aiortc side by side in the public namespace: an open path, and a TURN server
    # that refuses castd's credentials. The relay fails with its sentence; the host pair carries the cast.
    with TurnWorld() as world:
        user, credential = world.credentials(secret="not-the-secret")
        sender = await start_sender(world, bars_clip, user, credential, "--fps", "30", "--seconds", "20", ns="pub")
        pc = None
        try:
            pc, frames = await answer_from(world, sender, frames_wanted=30, ns="pub")
            for got, want in zip(bar_colours(frames[-1]), BARS):
                assert max(abs(g - w) for g, w in zip(got, want)) <= 12, (got, want)
        finally:
            if pc:
                await pc.close()
            await sender.stop()
        assert any(m["type"] == "relayFailed" and TURN_URL in m["message"] for m in sender.log)
        pairs = [m for m in sender.log if m["type"] == "selectedPair"]
        assert pairs and pairs[-1]["localType"] == "host", pairs
