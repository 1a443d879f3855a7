"""castd casting through the ScreenCast portal end to end: a stand-in portal on a private session bus hands out a
REAL PipeWire node (castd-pattern's picture) and a socket to the real daemon; castd captures it with --capture portal,
encodes, and an aiortc receiver decodes the picture. The restore token is saved (0600) and offered on the next start."""
import os
import stat

import numpy as np
import pytest

from castd_proc import Daemon, castd_env, pair
from tools.receiver_answerer import ReceiverAnswerer
from tools.wayland_standin import StandInScreenCast, expected_picture, installed

pytestmark = pytest.mark.skipif(not installed(), reason="pipewire, wireplumber or dbus-daemon missing (Scripts/bootstrap)")


async def cast_once(stack, tmp_path, screen, frames=20):
    rx, rc, _, raw = await pair(stack, tmp_path)
    assert rc == 0, raw
    sid = rx.session["sessionId"]
    answerer = ReceiverAnswerer(rx.client, sid, keep_frames=2)
    await answerer.start()
    env = castd_env(stack, tmp_path, **screen.env())
    env.pop("DISPLAY", None)
    daemon = await Daemon.start(env, sid, "--capture", "portal")
    try:
        await answerer.wait_frames(frames, timeout=60)
        frame = answerer.last_frame
        daemon.signal()
        rc, _ = await daemon.wait(timeout=10)
        assert rc == 0
    finally:
        await daemon.kill()
        await answerer.close()
        await rx.client.close()
    return frame, "\n".join(daemon.stderr_lines)


async def test_cast_through_the_portal_decodes_to_the_picture_and_reuses_the_restore_token(stack, tmp_path):
    screen = await StandInScreenCast(640, 480).start()
    try:
        frame, log = await cast_once(stack, tmp_path, screen)
        assert frame.shape == (480, 640, 3)
        want = expected_picture(640, 480)
        # Rows 0..3 carry the producer's frame counter; the x & 0xff ramp wraps sharply at x = 256 and 512.
        err = np.abs(frame[4:].astype(int) - want[4:].astype(int)).mean()
        assert err < 6, f"mean absolute error {err:.2f}"
        started = [l for l in log.splitlines() if "event=portal_started" in l]
        assert len(started) == 1 and "none saved" in started[0] and "token_saved=true" in started[0], log
        assert "backend=portal" in log
        token_file = tmp_path / "castd" / "screencast-restore-token"
        assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(tmp_path / "castd").st_mode) == 0o700
        first_token = token_file.read_text().strip()
        assert first_token.startswith("standin-")

        _, log2 = await cast_once(stack, tmp_path, screen, frames=5)
        assert any("event=portal_started" in l and "restore_token=offered" in l for l in log2.splitlines()), log2
        selects = [c["options"] for c in screen.calls() if c["call"] == "SelectSources"]
        assert [s.get("restore_token") for s in selects] == [None, first_token]
        assert all(s["persist_mode"] == 2 and s["types"] == 1 and s["cursor_mode"] == 4 for s in selects)
        assert token_file.read_text().strip() not in ("", first_token)   # single use: a new one after every start
        assert first_token not in log + log2                                # never logged
    finally:
        screen.stop()
