"""castd casting a real (Xvfb) screen end to end: capture → x264 → RTP/SRTP → an aiortc receiver
that decodes the frames, through the local stack's signaling."""
import asyncio

from castd_proc import Daemon, castd_env, pair
from tools.receiver_answerer import ReceiverAnswerer
from xscreen import XScreen, bar_colours, bars_match


async def test_cast_of_an_xvfb_screen_decodes_to_the_pattern(stack, tmp_path):
    screen = await XScreen(1280, 720).start()
    rx, rc, events, raw = await pair(stack, tmp_path, prefs={"autoQuality": True, "resolution": "1080p", "frameRate": 30})
    assert rc == 0, raw
    sid = rx.session["sessionId"]
    answerer = ReceiverAnswerer(rx.client, sid, keep_frames=3)
    await answerer.start()
    daemon = await Daemon.start(castd_env(stack, tmp_path, DISPLAY=screen.display), sid)
    try:
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
    finally:
        await daemon.kill()
        await answerer.close()
        await rx.client.close()
        screen.stop()
    log = "\n".join(daemon.stderr_lines)
    assert "event=capture_started" in log and "backend=xshm" in log
    assert "kind=x264" in log


async def test_a_larger_screen_is_downscaled_to_1080p(stack, tmp_path):
    screen = await XScreen(2560, 1440).start()
    rx, rc, events, raw = await pair(stack, tmp_path)
    sid = rx.session["sessionId"]
    answerer = ReceiverAnswerer(rx.client, sid, keep_frames=2)
    await answerer.start()
    daemon = await Daemon.start(castd_env(stack, tmp_path, DISPLAY=screen.display), sid)
    try:
        await answerer.wait_frames(20, timeout=60)
        frame = answerer.last_frame
        assert frame.shape == (1080, 1920, 3)
        assert bars_match(frame, tolerance=12), bar_colours(frame)
    finally:
        daemon.signal()
        await daemon.wait(timeout=10)
        await daemon.kill()
        await answerer.close()
        await rx.client.close()
        screen.stop()
