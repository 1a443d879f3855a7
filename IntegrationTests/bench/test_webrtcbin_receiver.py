"""Smoke test of tools/webrtcbin_receiver.py (GStreamer's webrtcbin as the receiver, for the
Scripts/faults row that checks castd sends no loss-protection copies to it): it answers the
reference sender's offer through the local stack and counts the H.264 access units that
arrive; with nothing lost it has no reason to NACK much."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "IntegrationTests"))
sys.path.insert(0, str(ROOT / "IntegrationTests" / "daemon"))
from castd_proc import Receiver  # noqa: E402
from tools.ref_sender import RefSender  # noqa: E402
from tools.signaling import StackClient, StackConfig  # noqa: E402
from tools.webrtcbin_receiver import WebrtcbinAnswerer  # noqa: E402


@pytest.mark.timeout(90)
async def test_webrtcbin_answers_and_counts_access_units(stack):
    rx = Receiver(stack)
    s = await rx.create()
    answerer = None
    async with StackClient(StackConfig(stack.api_url, stack.supabase_url, stack.key)) as client:
        sender = RefSender(client, width=640, height=360, ice_servers=[])
        try:
            await sender.pair(pin=s["pin"])
            await rx.wait_pairing_then(True, {"autoQuality": True, "resolution": "1080p", "frameRate": 30})
            await sender.wait_approved()
            answerer = WebrtcbinAnswerer(rx.client, s["sessionId"])
            await answerer.start()
            await sender.start()
            await answerer.wait_frames(60, timeout=40)
            assert answerer.access_units >= 60
            assert answerer.negotiation_id == sender.negotiation_id
            nacks = answerer.pc.nacks_sent()
            assert nacks is None or nacks < answerer.access_units, nacks
        finally:
            await sender.stop()
            if answerer:
                await answerer.close()
            await rx.client.close()
