"""castd casting through the ScreenCast portal end to end: a stand-in portal on a private session bus hands out a
REAL PipeWire node (castd-pattern's picture) and a socket to the real daemon; castd captures it with --capture portal,
encodes, and an aiortc receiver decodes the picture. The restore token is saved (0600) and offered on the next start."""
import asyncio
import os
import stat

import numpy as np
import pytest

from castkit.castd_proc import Daemon, castd_env, pair
from castkit.receiver_answerer import ReceiverAnswerer
from castkit.wayland_standin import StandInScreenCast, expected_picture, installed

pytestmark = pytest.mark.skipif(not installed(), reason="pipewire, wireplumber or dbus-daemon missing (Scripts/bootstrap)")


class PortalCast:
    """A paired aiortc receiver and `castd --capture portal` on the stand-in's screen."""

    @classmethod
    async def start(cls, stack, tmp_path, screen: StandInScreenCast, *extra: str) -> "PortalCast":
        self = cls()
        self.rx, rc, _, raw = await pair(stack, tmp_path)
        assert rc == 0, raw
        self.answerer = ReceiverAnswerer(self.rx.client, self.rx.session["sessionId"], keep_frames=2)
        await self.answerer.start()
        env = castd_env(stack, tmp_path, **screen.env())
        env.pop("DISPLAY", None)
        self.daemon = await Daemon.start(env, self.rx.session["sessionId"], "--capture", "portal", *extra)
        return self

    @property
    def log(self) -> str:
        return "\n".join(self.daemon.stderr_lines)

    async def stop(self) -> int | None:
        """SIGTERM, then whatever is left is killed and closed; castd's exit code, None if it hung."""
        self.daemon.signal()
        try:
            rc, _ = await self.daemon.wait(timeout=10)
        except asyncio.TimeoutError:
            rc = None
        for close in (self.daemon.kill, self.answerer.close, self.rx.client.close):
            await close()
        return rc


def picture_error(frame: np.ndarray, width: int, height: int) -> float:
    """Mean absolute difference from the producer's picture; rows 0..3 carry its frame counter."""
    return float(np.abs(frame[4:].astype(int) - expected_picture(width, height)[4:].astype(int)).mean())


async def cast_the_picture(stack, tmp_path, screen: StandInScreenCast) -> str:
    """Casts until the receiver decoded 20 frames, stops castd (exit 0), checks the last frame is the producer's
    picture, and returns castd's log."""
    cast = await PortalCast.start(stack, tmp_path, screen)
    await cast.answerer.wait_frames(20, timeout=60)
    frame = cast.answerer.last_frame
    assert await cast.stop() == 0
    assert frame.shape == (screen.height, screen.width, 3)
    err = picture_error(frame, screen.width, screen.height)   # the x & 0xff ramp wraps sharply at x = 256 and 512
    assert err < 6, f"mean absolute error {err:.2f}"
    return cast.log


async def test_cast_through_the_portal_decodes_to_the_picture_and_reuses_the_restore_token(stack, tmp_path):
    screen = await StandInScreenCast(640, 480).start()
    try:
        log = await cast_the_picture(stack, tmp_path, screen)
        started = [l for l in log.splitlines() if "event=portal_started" in l]
        assert len(started) == 1 and "none saved" in started[0] and "token_saved=true" in started[0], log
        assert "backend=portal" in log
        token_file = tmp_path / "castd" / "screencast-restore-token"
        assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(tmp_path / "castd").st_mode) == 0o700
        # The file holds the token and what it restores (docs/capture-sources.md).
        saved = dict(l.split("=", 1) for l in token_file.read_text().splitlines()[1:] if "=" in l)
        first_token = saved["token"]
        assert first_token.startswith("standin-")
        assert saved["source_type"] == "monitor" and saved["size"] == "640x480", saved

        again = await PortalCast.start(stack, tmp_path, screen)
        await again.answerer.wait_frames(5, timeout=60)
        assert await again.stop() == 0
        assert any("event=portal_started" in l and "restore_token=offered" in l for l in again.log.splitlines()), again.log
        selects = [c["options"] for c in screen.calls() if c["call"] == "SelectSources"]
        assert [s.get("restore_token") for s in selects] == [None, first_token]
        assert all(s["persist_mode"] == 2 and s["types"] == 1 and s["cursor_mode"] == 4 for s in selects)
        assert any("event=portal_restore" in l and "640x480" in l for l in again.log.splitlines()), again.log
        # single use: a new one after every start
        assert f"token={first_token}\n" not in token_file.read_text() and "token=standin-" in token_file.read_text()
        assert first_token not in log + again.log                           # never logged
    finally:
        screen.stop()


async def test_a_linear_dmabuf_screen_is_negotiated_mapped_and_decodes_to_the_picture(stack, tmp_path):
    """castd-pattern --dmabuf offers only DMA-BUF buffers with the linear modifier (memfds passed as DMA-BUF fds, as
    a compositor passes a GPU's): castd negotiates DMA-BUF, maps the buffers itself, and the receiver decodes the
    same picture as over shared memory."""
    screen = await StandInScreenCast(640, 480, pattern_args=("--dmabuf",)).start()
    try:
        log = await cast_the_picture(stack, tmp_path, screen)
        assert [l.split(" ", 1)[1] for l in log.splitlines() if "event=capture_buffers" in l] == [
            "event=capture_buffers buffers=dmabuf modifier=linear"], log
        assert "capture_buffer_unusable" not in log, log
    finally:
        screen.stop()


async def test_a_static_portal_screen_still_reaches_the_receiver_every_second(stack, tmp_path):
    """The producer sends three frames and then nothing (Mutter on an unchanging screen); castd sends its last frame
    again at least once a second, so the receiver never times out."""
    screen = await StandInScreenCast(320, 240, static=True).start()
    try:
        cast = await PortalCast.start(stack, tmp_path, screen)
        await cast.answerer.wait_frames(1, timeout=60)
        start = len(cast.answerer.frames)
        await asyncio.sleep(5)
        arrivals = [f.arrived for f in cast.answerer.frames[start:]]
        frame = cast.answerer.last_frame
        await cast.stop()
        assert len(arrivals) >= 4, f"{len(arrivals)} frames in 5 s of a static screen"
        gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
        assert max(gaps) < 1.5, gaps
        assert len(arrivals) <= 15, f"{len(arrivals)} frames: a static screen is not re-encoded at full rate"
        assert picture_error(frame, 320, 240) < 6
    finally:
        screen.stop()


async def test_a_portal_dialog_nobody_answers_ends_the_cast_with_a_reason_instead_of_hanging(stack, tmp_path):
    """The portal's Start never answers (its dialog waits for a person; castd runs as a daemon with nobody there):
    after --portal-timeout castd says so, sends disconnect `capture_needs_user`, ends the session and exits 1,
    without asking the portal again."""
    screen = await StandInScreenCast(320, 240, portal_args=("--never-answer",)).start()
    cast = None
    try:
        cast = await PortalCast.start(stack, tmp_path, screen, "--portal-timeout", "2")
        try:
            row = await cast.answerer.signals.wait_row(lambda r: r["message_type"] == "disconnect", timeout=45)
        except TimeoutError:
            raise AssertionError("no disconnect row; castd said:\n" + cast.log[-3000:])
        assert row["payload"] == {"reason": "capture_needs_user"}
        await cast.answerer.signals.wait_status("disconnected", timeout=10)
        rc, out = await cast.daemon.wait(timeout=10)
        log = cast.log
        assert rc == 1, log[-3000:]
        said = out + log
        assert "nobody is there" in said and "accept" in said, said[-3000:]   # the sentence for the person reading
        assert "no restore token was saved" in said
        assert "event=capture_needs_user" in log
        assert "capture_open_failed" not in log                    # not retried as if it were a glitch
        assert [c["call"] for c in screen.calls()].count("Start") == 1
        assert not (tmp_path / "castd" / "screencast-restore-token").exists()
    finally:
        if cast:
            for close in (cast.daemon.kill, cast.answerer.close, cast.rx.client.close):
                await close()
        screen.stop()
