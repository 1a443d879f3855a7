"""castd's WebRTC send path against aiortc, an independent implementation, as the answerer.

castd (dev-send) offers; aiortc answers, decodes every frame, and the test checks the
pixels of the SMPTE colour bars, the frame size and that frames keep coming.
"""
import pytest

from castkit.devsender import BARS, DevSender, answer_with_aiortc, assert_sent_cleanly, bar_colours


async def bars_decoded_by_aiortc(bars_clip) -> dict:
    """castd casts the colour bars, aiortc answers and decodes 60 frames whose bars must be
    right; dev-send must exit cleanly (no SRTP error). Its last statistics."""
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
        # castd's sender reports came through SRTCP: aiortc (libsrtp) unprotected and read at
        # least one (it only logs an SRTCP it cannot unprotect, so look at what it kept).
        reports = [s for s in (await pc.getStats()).values() if s.type == "remote-outbound-rtp"]
        assert reports and reports[0].packetsSent > 0, reports
    finally:
        if pc:
            await pc.close()
        rc = await sender.stop()
    return assert_sent_cleanly(sender, rc, frames=60)


@pytest.mark.asyncio
async def test_aiortc_decodes_castds_colour_bars(bars_clip):
    stats = await bars_decoded_by_aiortc(bars_clip)
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


@pytest.mark.asyncio
@pytest.mark.parametrize("profile", ["SRTP_AES128_CM_SHA1_80", "SRTP_AEAD_AES_128_GCM"])
async def test_aiortc_decodes_castds_own_srtp_with_each_profile(bars_clip, monkeypatch, profile):
    # castd protects outgoing RTP itself (issue 19), with both profiles it offers. aiortc
    # (libsrtp underneath) is made to offer only one, so the handshake must choose it, and
    # every frame it decodes went through castd's transform of that profile.
    import aiortc.rtcdtlstransport as dtls
    only = [p for p in dtls.SRTP_PROFILES if p.openssl_profile.decode() == profile]
    assert only, f"this aiortc has no {profile}"
    monkeypatch.setattr(dtls, "SRTP_PROFILES", only)
    await bars_decoded_by_aiortc(bars_clip)
