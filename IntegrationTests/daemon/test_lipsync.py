"""Lip sync, measured (issue 18): castd --session casts an Xvfb screen and a private
PipeWire's sink to aiortc; every 2 s the screen flashes white and a click starts in the
sink at the same CLOCK_MONOTONIC instant (IntegrationTests/castkit/bench/flashclick.py); aiortc maps each
flash's and click's RTP timestamp to castd's NTP time through each SSRC's last RTCP SR, and
the median click − flash offset must stay within ±45 ms (ITU-R BT.1359's detectability
threshold for sound early; the issue's target). IntegrationTests/castkit/bench/lipsync.py is the longer
run with the figure in docs/audio.md. ~40 s."""
import pytest

from castkit.audio_rig import installed

pytestmark = pytest.mark.skipif(not installed(), reason="pipewire, wireplumber or pw-play missing (Scripts/bootstrap)")

EVENTS = 5


@pytest.mark.timeout(120)
async def test_flash_and_click_arrive_within_45_ms_by_the_sender_reports(stack):
    from castkit.bench.lipsync import measure
    r = await measure(stack, events=EVENTS, period=2.0)
    print(r)
    # Every flash and click seen and paired: a mapping that were off by seconds pairs none.
    assert r["events"] >= EVENTS, r
    assert len(r["sender_reports"]) == 2 and r["video_ssrc"] != r["audio_ssrc"], r
    # castd's own share (the player's latency under load, measured at the sink monitor, taken out).
    assert r["castd_own_median_ms"] is not None and abs(r["castd_own_median_ms"]) <= 45, r
