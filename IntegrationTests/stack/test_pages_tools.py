"""The Python signaling tools end to end, without a browser: tools/ref_sender.py
streams to tools/receiver_answerer.py through the stack's signaling, so the
answerer that other tests use as an exact-pixel receiver is itself checked.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import random_ip  # noqa: E402
from tools.pattern import BARS, ColourBars  # noqa: E402
from tools.receiver_answerer import ReceiverAnswerer  # noqa: E402
from tools.ref_sender import RefSender  # noqa: E402
from tools.signaling import StackClient, StackConfig  # noqa: E402

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
