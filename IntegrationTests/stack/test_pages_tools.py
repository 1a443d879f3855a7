"""The Python signaling tools end to end, without a browser: castkit/ref_sender.py
streams to castkit/receiver_answerer.py through the stack's signaling, so the
answerer that other tests use as an exact-pixel receiver is itself checked.
"""
from __future__ import annotations

import asyncio

import numpy as np
import pytest

from castkit.devstack import random_ip
from castkit.pattern import BARS, ColourBars
from castkit.receiver_answerer import ReceiverAnswerer
from castkit.ref_sender import RefSender
from castkit.signaling import StackClient, StackConfig

pytestmark = pytest.mark.asyncio


def test_pattern_counter_round_trips_and_bars_are_where_they_are_said_to_be():
    p = ColourBars(640, 360)
    for n in (0, 1, 0x5A5A, 0xFFFF):
        assert p.read_counter(p.frame(n)) == n
    f = p.frame(7)
    for name, rgb in BARS:
        x, y = p.bar_centre(name)
        assert tuple(f[y, x]) == rgb
    with pytest.raises(ValueError):
        ColourBars(641, 360)


@pytest.mark.timeout(60)
async def test_reference_sender_to_python_answerer_frames_counters_and_colours(stack):
    config = StackConfig(stack.api_url, stack.supabase_url, stack.key)
    async with StackClient(config) as receiver, StackClient(config, forwarded_for=random_ip()) as sc:
        created = await receiver.api("session-create", {})
        sid = created["sessionId"]
        rx = ReceiverAnswerer(receiver, sid)
        await rx.start()
        sender = RefSender(sc, width=640, height=360, fps=30, ice_servers=None)
        try:
            await sender.pair(pin=created["pin"])
            await receiver.api("session-approve", {"sessionId": sid, "approve": True,
                                                   "streamPrefs": {"autoQuality": True, "resolution": "720p", "frameRate": 30}})
            prefs = await sender.wait_approved(timeout=10)
            assert prefs["streamPrefs"] == {"autoQuality": True, "resolution": "720p", "frameRate": 30}
            await sender.start()
            await rx.wait_frames(45, timeout=20)
            assert rx.codecs == ["H264/90000"]
            assert {(f.width, f.height) for f in rx.frames} == {(640, 360)}
            assert {f.negotiation_id for f in rx.frames} == {sender.negotiation_id}
            img = rx.last_frame
            pattern = ColourBars(640, 360)
            n = pattern.read_counter(img)
            assert 0 < n < sender.track.count  # a frame that was sent, read back from pixels
            for name, rgb in BARS:
                x, y = pattern.bar_centre(name)
                patch = img[y - 4 : y + 4, x - 4 : x + 4].reshape(-1, 3).mean(axis=0)
                assert np.all(np.abs(patch - np.array(rgb)) <= 12), (name, patch, rgb)
            # The sender reported `connected`; stop sends disconnect + end.
            await sender.stop()
            await rx.signals.wait_row(lambda r: r["message_type"] == "disconnect", timeout=10)
            assert rx.disconnect_reason == "sender_ended"
            await rx.signals.wait_status("disconnected", timeout=10)
        finally:
            await sender.close()
            await rx.close()


@pytest.mark.timeout(60)
async def test_python_signaling_refreshes_tokens_and_keeps_its_channel(stack_factory):
    stack = stack_factory(access_token_ttl=12)
    config = StackConfig(stack.api_url, stack.supabase_url, stack.key)
    async with StackClient(config) as receiver, StackClient(config, forwarded_for=random_ip()) as sc:
        created = await receiver.api("session-create", {})
        sid = created["sessionId"]
        sender = RefSender(sc, ice_servers=[])
        await sender.pair(pin=created["pin"])
        first = sc._session["refresh_token"]
        # Past the first token's expiry (12 s): refreshed (rotated) and pushed.
        await asyncio.sleep(15)
        assert sc._session["refresh_token"] != first
        assert sender.signals.channel.token_pushes >= 1
        await receiver.api("session-approve", {"sessionId": sid, "approve": True})
        await sender.wait_approved(timeout=10)   # delivered on the same, never rejoined channel
        assert sender.signals.channel.joins == 1
        await sender.close()


def test_split_candidates_moves_first_section_candidates_into_row_payloads():
    from castkit.trickle import split_candidates
    sdp = ("v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0 1\r\n"
           "m=video 5000 UDP/TLS/RTP/SAVPF 96\r\na=ice-ufrag:abcd\r\n"
           "a=candidate:1 1 udp 2130706431 192.0.2.2 5000 typ host\r\n"
           "a=candidate:2 1 udp 1694498815 198.51.100.7 6000 typ srflx raddr 192.0.2.2 rport 5000\r\n"
           "a=end-of-candidates\r\na=mid:0\r\n"
           "m=audio 5000 UDP/TLS/RTP/SAVPF 111\r\na=ice-ufrag:abcd\r\na=mid:1\r\n"
           "a=candidate:1 1 udp 2130706431 192.0.2.2 5000 typ host\r\na=end-of-candidates\r\n")
    stripped, cands = split_candidates(sdp)
    assert stripped == ("v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0 1\r\n"
                        "m=video 5000 UDP/TLS/RTP/SAVPF 96\r\na=ice-ufrag:abcd\r\na=mid:0\r\n"
                        "m=audio 5000 UDP/TLS/RTP/SAVPF 111\r\na=ice-ufrag:abcd\r\na=mid:1\r\n")
    assert cands == [
        {"candidate": "candidate:1 1 udp 2130706431 192.0.2.2 5000 typ host", "sdpMid": "0",
         "sdpMLineIndex": 0, "usernameFragment": "abcd"},
        {"candidate": "candidate:2 1 udp 1694498815 198.51.100.7 6000 typ srflx raddr 192.0.2.2 rport 5000",
         "sdpMid": "0", "sdpMLineIndex": 0, "usernameFragment": "abcd"},
    ]
