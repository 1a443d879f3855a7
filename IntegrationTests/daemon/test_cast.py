"""castd casting a real (Xvfb) screen end to end: capture → x264 → RTP/SRTP → an aiortc receiver
that decodes the frames, through the local stack's signaling."""
import asyncio
import contextlib

from castkit.castd_proc import answered_cast, castd_env
from castkit.xscreen import XScreen, bar_colours, bars_match


@contextlib.asynccontextmanager
async def xvfb_cast(stack, tmp_path, width: int, height: int, *daemon_args: str, **kwargs):
    """An Xvfb screen of that size and castd casting it to an aiortc answerer (castd_proc.answered_cast,
    `daemon_args` and `kwargs` passed on). Yields (answerer, daemon); stops everything after."""
    screen = await XScreen(width, height).start()
    try:
        async with answered_cast(stack, tmp_path, castd_env(stack, tmp_path, DISPLAY=screen.display), *daemon_args,
                                 **kwargs) as cast:
            yield cast
    finally:
        screen.stop()


async def test_cast_of_an_xvfb_screen_decodes_to_the_pattern(stack, tmp_path):
    prefs = {"autoQuality": True, "resolution": "1080p", "frameRate": 30}
    async with xvfb_cast(stack, tmp_path, 1280, 720, keep_frames=3, prefs=prefs) as (answerer, daemon):
        await answerer.wait_frames(45, timeout=40)
        frame = answerer.last_frame
        assert frame.shape == (720, 1280, 3)
        assert bars_match(frame, tolerance=3), bar_colours(frame)   # flat bars: BT.709 round trip within ±3
        # The block moves: two frames a moment apart differ below the bars.
        a = answerer.last_frame.copy()
        await asyncio.sleep(0.5)
        b = answerer.last_frame
        assert (abs(a[500:700].astype(int) - b[500:700].astype(int)).sum()) > 0
        daemon.signal()
        rc, out = await daemon.wait(timeout=5)
        assert rc == 0
    log = "\n".join(daemon.stderr_lines)
    assert "event=capture_started" in log and "backend=xshm" in log
    assert "kind=x264" in log



async def test_aiortc_offered_high_first_still_gets_constrained_baseline(stack, tmp_path):
    # aiortc answers only the H.264 it decodes by profile (42001f, 42e01f): offered High first
    # (--h264-profile high), it takes 42e01f, castd's encoder makes Constrained Baseline, and
    # the frames decode to the pattern.
    async with xvfb_cast(stack, tmp_path, 1280, 720, "--h264-profile", "high") as (answerer, daemon):
        await answerer.wait_frames(20, timeout=40)
        assert bars_match(answerer.last_frame, tolerance=3), bar_colours(answerer.last_frame)
        daemon.signal()
        rc, out = await daemon.wait(timeout=5)
        assert rc == 0
    assert answerer.codecs and answerer.codecs[0].startswith("H264/"), answerer.codecs
    assert any("event=video_codec" in l and "profile=baseline" in l for l in daemon.stderr_lines), daemon.stderr_lines

async def test_a_larger_screen_is_downscaled_to_1080p(stack, tmp_path):
    async with xvfb_cast(stack, tmp_path, 2560, 1440, keep_frames=2) as (answerer, daemon):
        await answerer.wait_frames(20, timeout=60)
        frame = answerer.last_frame
        assert frame.shape == (1080, 1920, 3)
        assert bars_match(frame, tolerance=12), bar_colours(frame)
        daemon.signal()
        await daemon.wait(timeout=10)
