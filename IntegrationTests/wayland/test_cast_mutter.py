"""castd casting a headless GNOME Mutter screen end to end (issue #9): the rig's
compositor → org.gnome.Mutter.ScreenCast → PipeWire → castd (run as the rig's
user, on its session bus) → x264 → RTP/SRTP → an aiortc receiver that decodes
the frames, through the local stack's signaling."""
from __future__ import annotations

import asyncio
import os
import pathlib
import shutil
import sys
import tempfile

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "daemon"))
from castd_proc import Daemon, castd_binary, castd_env, pair  # noqa: E402
from xscreen import bar_colours, bars_match  # noqa: E402
from tools.mutter_rig import MutterRig, missing_tools  # noqa: E402
from tools.receiver_answerer import ReceiverAnswerer  # noqa: E402

pytestmark = pytest.mark.skipif(bool(missing_tools()), reason=f"rig tools missing: {missing_tools()}")


class MutterCast:
    """A rig, a paired castd state directory its user owns, an aiortc receiver and castd inside the rig."""

    def __init__(self, stack, width=1280, height=720, animate=True):
        self.stack = stack
        self.rig = MutterRig(width, height)
        self.animate = animate
        # castd's credentials live where the rig's user can write them (mode 0700/0600 as castd makes them).
        self.state = pathlib.Path(tempfile.mkdtemp(prefix="castd-mutter-state-"))
        self.rx = self.answerer = self.daemon = None

    async def start(self, *castd_args: str, prefs: dict | None = None):
        self.rig.start(animate=self.animate)
        self.rx, rc, _, raw = await pair(self.stack, self.state, prefs=prefs or {"resolution": "1080p", "frameRate": 30})
        assert rc == 0, raw
        if os.geteuid() == 0:
            for root, dirs, files in os.walk(self.state):
                for name in [root] + [os.path.join(root, n) for n in dirs + files]:
                    os.chown(name, self.rig.account.pw_uid, self.rig.account.pw_gid)
        sid = self.rx.session["sessionId"]
        self.answerer = ReceiverAnswerer(self.rx.client, sid, keep_frames=3)
        await self.answerer.start()
        env = castd_env(self.stack, self.state)
        env = {k: env[k] for k in ("CASTD_API_URL", "CASTD_SUPABASE_URL", "CASTD_SUPABASE_KEY", "XDG_STATE_HOME")}
        env.update(self.rig.env())
        p = await asyncio.create_subprocess_exec(
            *self.rig.as_user([castd_binary(), "--session", sid, "--log-level", "debug", *castd_args]),
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        self.daemon = Daemon(p)
        return self

    async def stop(self):
        if self.daemon:
            if self.daemon.proc.returncode is None:
                self.daemon.signal()
                try:
                    await self.daemon.wait(timeout=10)
                except asyncio.TimeoutError:
                    pass
            await self.daemon.kill()
        if self.answerer:
            await self.answerer.close()
        if self.rx:
            await self.rx.client.close()
        self.rig.stop()
        shutil.rmtree(self.state, ignore_errors=True)

    @property
    def log(self) -> str:
        return "\n".join(self.daemon.stderr_lines) if self.daemon else ""


@pytest.mark.timeout(120)
async def test_cast_of_a_headless_mutter_screen_decodes_to_the_pattern(stack):
    cast = MutterCast(stack, 1280, 720)
    try:
        await cast.start("--capture", "mutter")
        await cast.answerer.wait_frames(45, timeout=60)
        frame = cast.answerer.last_frame
        assert frame.shape == (720, 1280, 3)
        assert bars_match(frame, tolerance=3), bar_colours(frame)   # flat bars: BT.709 round trip within ±3
        # The box moves: two frames a moment apart differ below the bars, and the bars do not.
        a = cast.answerer.last_frame.astype(int)
        await asyncio.sleep(0.5)
        b = cast.answerer.last_frame.astype(int)
        assert np.abs(a[2 * 720 // 3:] - b[2 * 720 // 3:]).sum() > 0
        cast.daemon.signal()
        rc, _ = await cast.daemon.wait(timeout=10)
        assert rc == 0, cast.log[-3000:]
    finally:
        await cast.stop()
    assert "event=capture_backend" in cast.log and "backend=mutter" in cast.log
    assert "event=mutter_cast" in cast.log
    assert "kind=x264" in cast.log


@pytest.mark.timeout(120)
async def test_auto_picks_mutter_in_a_wayland_session(stack):
    cast = MutterCast(stack, 640, 480)
    try:
        await cast.start()
        await cast.answerer.wait_frames(10, timeout=60)
        assert cast.answerer.last_frame.shape == (480, 640, 3)
        assert bars_match(cast.answerer.last_frame, tolerance=3), bar_colours(cast.answerer.last_frame)
    finally:
        await cast.stop()
    assert "a Wayland session where org.gnome.Mutter.ScreenCast answers" in cast.log


@pytest.mark.timeout(150)
async def test_a_static_screen_still_reaches_the_receiver_every_second(stack):
    """Mutter sends a frame only on damage; the rig draws its picture once. castd must
    still deliver at least one frame per second (its refresh), at a small fraction of a busy screen's rate."""
    cast = MutterCast(stack, 1280, 720, animate=False)
    try:
        await cast.start("--capture", "mutter")
        await cast.answerer.wait_frames(1, timeout=60)
        await asyncio.sleep(2)   # past the first frames of the cast
        t0 = cast.answerer.frames[-1].arrived if cast.answerer.frames else 0
        window = 20.0
        await asyncio.sleep(window)
        times = [f.arrived for f in cast.answerer.frames if f.arrived > t0]
        assert bars_match(cast.answerer.last_frame, tolerance=3), bar_colours(cast.answerer.last_frame)
        cast.daemon.signal()
        await cast.daemon.wait(timeout=10)
    finally:
        await cast.stop()
    # Every second of the window saw a frame: no gap longer than the refresh interval plus scheduling slack.
    edges = [t0] + times + [t0 + window]
    gaps = [b - a for a, b in zip(edges, edges[1:])]
    assert len(times) >= window * 0.9, (len(times), gaps)
    assert max(gaps) < 1.5, gaps
    # A still screen is not re-sent at the frame rate (30 fps would be ~600 frames).
    assert len(times) <= window * 3, len(times)
    assert "refreshes=" in cast.log
