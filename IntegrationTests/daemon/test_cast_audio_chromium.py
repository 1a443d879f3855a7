"""castd --session casting an Xvfb screen and desktop audio (issue 18) to the stack's
/viewer/:id in headless Chromium: a private PipeWire with a virtual sink plays a 1 kHz
tone; Chromium's getStats shows the audio samples rising, little concealed on a clean
link, stereo kept in the answer, and a level. A viewer that rejects the audio m-line and
`castd --audio off` still get the video.

Chromium runs with its mDNS host candidates off (no multicast leaves these tests, so
they need no network namespace of their own). 30–40 s each: Scripts/faults runs them
(the `audio` rows); they are not part of the quick CI set."""
import asyncio
import contextlib
import re
import pathlib
import sys

import pytest

from castkit.castd_proc import Daemon, castd_env, run_castd
from castkit.chromium import Chromium
from castkit.receiver_pages import Dashboard, Viewer
from castkit.xscreen import XScreen

from castkit.audio_rig import PipeWireAudioRig, installed, write_tone

pytestmark = pytest.mark.skipif(not installed(), reason="pipewire, wireplumber or pw-play missing (Scripts/bootstrap)")

AMPLITUDE = 0.5


@contextlib.asynccontextmanager
async def audio_cast(stack, tmp_path, *daemon_args, viewer_audio=None):
    """Tone playing into a private PipeWire, Xvfb, Chromium on the dashboard, `castd pair`
    approved, the viewer open, `castd --session` casting. Yields (viewer, daemon)."""
    rig = await PipeWireAudioRig().start()
    wav = tmp_path / "tone.wav"
    write_tone(wav, 1000, AMPLITUDE, seconds=120)
    rig.play(wav)
    screen = await XScreen(1280, 720).start()
    browser = await Chromium(hide_mdns=False).start()
    daemon = None
    try:
        dash = await Dashboard.open(browser, stack.dashboard)
        env = castd_env(stack, tmp_path, DISPLAY=screen.display, **rig.env())
        pairing = asyncio.create_task(run_castd(env, "pair", "--pin", dash.pin, "--json"))
        await dash.approve(resolution="720p", frame_rate=30)
        rc, out, err = await pairing
        assert rc == 0, out + err
        viewer = await Viewer.open(browser, stack.api_url, dash.session_id, audio=viewer_audio)
        daemon = await Daemon.start(env, dash.session_id, *daemon_args)
        yield viewer, daemon
    finally:
        if daemon:
            await daemon.kill()
            print("castd log (last 40 lines):\n" + "\n".join(daemon.stderr_lines[-40:]))
        await browser.close()
        screen.stop()
        rig.stop()


async def audio_stats(viewer: Viewer, expr: str, timeout: float) -> dict:
    return await viewer.page.wait_for(f"(a => a && ({expr}) && a)(window.castdViewer.stats?.audio)", timeout=timeout)


@pytest.mark.timeout(120)
async def test_chromium_plays_castds_desktop_audio_with_little_concealment(request, tmp_path):
    stack = request.getfixturevalue("stack")
    async with audio_cast(stack, tmp_path) as (viewer, daemon):
        await viewer.wait_frames(10, timeout=40)
        await daemon.wait_log("event=audio_negotiated", timeout=5)
        # From 1 s of audio on: the start (jitter buffer filling, the player's start) is not the steady state.
        first = await audio_stats(viewer, "a.totalSamplesReceived >= 48000", timeout=20)
        await asyncio.sleep(5)
        later = await audio_stats(viewer, f"a.totalSamplesReceived > {first['totalSamplesReceived']}", timeout=5)
        stats_lines = [l for l in daemon.stderr_lines if "event=stats" in l]
    received = later["totalSamplesReceived"] - first["totalSamplesReceived"]
    concealed = later["concealedSamples"] - first["concealedSamples"]
    print(f"AUDIO first={first}\nAUDIO later={later}\nreceived {received} samples, concealed {concealed} "
          f"({100 * concealed / max(received, 1):.2f} %)")
    print("\n".join(stats_lines[-2:]))
    assert later["codec"] == "opus"
    assert "stereo=1" in (later["sdpFmtpLine"] or ""), later
    assert later["channels"] == 2, later
    # ~5 s at 48 kHz (the stats poll runs once a second: allow its phase).
    assert received >= 4 * 48_000, later
    assert concealed < 0.02 * received, (concealed, received)
    # Chromium measures audioLevel at playout, and the viewer's <video> is muted (autoplay):
    # it reports 0. The level is checked where castd measures it (RFC 6464, per frame): the
    # tone plays at −9.03 dBFS RMS (−6 dBFS peak).
    assert later["audioLevel"] is not None, later
    assert later["packetsLost"] == 0
    last = stats_lines[-1]
    assert int(re.search(r"audio_sent=(\d+)", last)[1]) > 200, last
    assert abs(int(re.search(r"audio_level_dbov=(-?\d+)", last)[1]) + 9) <= 1, last


@pytest.mark.timeout(120)
async def test_a_viewer_rejecting_audio_still_gets_video(request, tmp_path):
    stack = request.getfixturevalue("stack")
    async with audio_cast(stack, tmp_path, viewer_audio="reject") as (viewer, daemon):
        # Video keeps coming (a few frames: the debug build converts a 720p frame in ~1.7 s here).
        first = await viewer.wait_frames(5, timeout=60)
        await viewer.wait_frames(first["framesDecoded"] + 5, timeout=40)
        await daemon.wait_log("event=audio_rejected", timeout=5)
        s = await viewer.stats()
    line = next(l for l in daemon.stderr_lines if "event=audio_rejected" in l)
    # Chromium answers a stopped transceiver's line `inactive` (RFC 3264 §6.1), not with port 0.
    assert 'reason="the receiver answered the audio m-line inactive"' in line and 'effect="video only"' in line, line
    assert not (s.get("audio") or {}).get("packetsReceived"), s


@pytest.mark.timeout(120)
async def test_audio_off_offers_video_only(request, tmp_path):
    stack = request.getfixturevalue("stack")
    async with audio_cast(stack, tmp_path, "--audio", "off") as (viewer, daemon):
        # Video keeps coming (a few frames: the debug build converts a 720p frame in ~1.7 s here).
        first = await viewer.wait_frames(5, timeout=60)
        await viewer.wait_frames(first["framesDecoded"] + 5, timeout=40)
        s = await viewer.stats()
    assert daemon.log_has("event=audio_off")
    assert not daemon.log_has("event=audio_negotiated")
    assert s["audio"] is None and s["streams"] == ["video"], s
