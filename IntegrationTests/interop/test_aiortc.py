"""castd's WebRTC send path against aiortc, an independent implementation, as the answerer.

castd (dev-send) offers; aiortc answers, decodes every frame, and the test checks the
pixels of the SMPTE colour bars, the frame size and that frames keep coming.
"""
import pytest

from castkit.devsender import BARS, DevSender, answer_with_aiortc, assert_sent_cleanly, bar_colours


@pytest.mark.asyncio
async def test_aiortc_decodes_castds_colour_bars(bars_clip):
    sender = await DevSender.start(bars_clip, "--fps", "30", "--seconds", "20")
    pc = None
    try:
        pc, frames = await answer_with_aiortc(sender, frames_wanted=60)
        await sender.next("state", timeout=5) if not any(
            m["type"] == "state" and m["state"] == "connected" for m in sender.log) else None
        assert any(m["type"] == "state" and m["state"] == "connected" for m in sender.log)
        last = frames[-1]
        assert last.shape == (360, 640, 3)
        for got, want in zip(bar_colours(last), BARS):
            assert max(abs(g - w) for g, w in zip(got, want)) <= 12, (got, want)
    finally:
        if pc:
            await pc.close()
        rc = await sender.stop()
    stats = assert_sent_cleanly(sender, rc, frames=60)
    assert stats["senderReportsSent"] >= 1


@pytest.mark.asyncio
async def test_lost_packets_are_nacked_by_aiortc_and_resent_over_rtx(bars_clip):
    # castd drops 3 % of its media packets (fault injection in dev-send); aiortc,
    # an independent receiver, NACKs the gaps and castd resends them over RTX.
    sender = await DevSender.start(bars_clip, "--fps", "30", "--seconds", "20", "--drop-rtp", "0.03")
    pc = None
    try:
        pc, frames = await answer_with_aiortc(sender, frames_wanted=90)
        last = frames[-1]
        for got, want in zip(bar_colours(last), BARS):
            assert max(abs(g - w) for g, w in zip(got, want)) <= 12, (got, want)
    finally:
        if pc:
            await pc.close()
        await sender.stop()
    stats = sender.stats()
    assert stats["injectedDrops"] > 0
    assert stats["nacksReceived"] > 0
    assert stats["retransmissionsSent"] > 0
