"""castd `--capture portal --source window` through the REAL GNOME ScreenCast portal (issue 31): xdg-desktop-portal
with xdg-desktop-portal-gnome 43 on a headless GNOME Shell rig (castkit/mutter_rig.py, `shell=True`; the portal lists
windows from GNOME Shell's org.gnome.Shell.Introspect, which plain Mutter does not serve). The pattern is drawn in an
undecorated 640x360 window in the middle of the 1280x720 screen, on GNOME Shell's blue background under its top bar.
castd asks for a window (`types` 2); the portal's "Screen Share" dialog lists "castd pattern", and the test picks it
and presses Share with pointer clicks through org.gnome.Mutter.RemoteDesktop. Mutter's window stream is
monitor-sized with the window at a place in it, marked by SPA_META_VideoCrop: castd sends the crop alone, so the
receiver decodes a 640x360 frame that is the window's picture edge to edge (nothing of the screen, no black margin).
castd logs `asked_for=window sharing=window`, and the window's restore token is saved in its own file (0600). The
second start offers the token and the portal restores the window with no dialog. The window grows to 960x360 (the
pattern client resizes itself; GNOME Shell moves and resizes other clients' windows only through its own APIs):
the receiver keeps its 640x360 frame, the window shrunk into it between black bars. Then the window closes: the
receiver sees the grey slate, castd logs `shared_window_closed` and `capture_source_ended`, sends disconnect
`shared_window_closed` and exits 0, without asking the portal again. The second test does the same with the real
receiver, the stack's viewer in headless Chromium, sampling its canvas."""
from __future__ import annotations

import asyncio
import json
import os
import pathlib
import shutil
import signal
import stat
import tempfile

import numpy as np
import pytest

from castkit.castd_proc import Daemon, castd_binary, castd_env, run_castd
from castkit.chromium import Chromium
from castkit.mutter_rig import SHELL_PANEL, MutterRig, missing_portal, missing_shell, missing_tools, \
    portal_dialog_accept
from castkit.portal_cast import PortalCastOnRig, saved_token
from castkit.receiver_pages import Dashboard, Viewer
from castkit.xscreen import BARS, bar_colours, bars_match

MISSING = missing_tools() + missing_portal() + missing_shell()
pytestmark = [pytest.mark.long,
              pytest.mark.skipif(bool(MISSING), reason=f"GNOME Shell rig or portal missing (Debian packages; "
                                                       f"gnome-shell is not in Scripts/bootstrap): {MISSING}")]

W, H = 1280, 720
WINDOW = (640, 360)
GREY = (64, 64, 64)   # the pattern's bottom third


def near(px, want, tolerance=6) -> bool:
    return max(abs(int(g) - w) for g, w in zip(px, want)) <= tolerance


def shows_the_window_alone(frame: np.ndarray, rows: tuple[int, int] | None = None) -> bool:
    """The pattern's bars and its grey bottom third out to both edges of the frame, or of `rows` (a letterboxed
    window) with black above and below: the window's picture, and nothing of the screen (GNOME Shell's blue
    background, its top bar, the portal's dialog)."""
    top, bottom = rows or (0, frame.shape[0])
    part = frame[top:bottom]
    h, w, _ = part.shape
    bars = bars_match(part, tolerance=6) and near(part[int(h * 0.9), int(w * 0.02)], GREY) \
        and near(part[int(h * 0.9), int(w * 0.98)], GREY)
    if rows is None:
        return bars
    margin = 4   # the encoder's blur at the bars' edge
    return bars and int(frame[:top - margin].max()) <= 24 and int(frame[bottom + margin:].max()) <= 24


def is_slate(frame: np.ndarray) -> bool:
    """castd's grey slate (a closed window), edge to edge."""
    h, w, _ = frame.shape
    return all(near(frame[y, x], GREY) for y in (h // 10, h // 2, h * 9 // 10) for x in (w // 10, w // 2, w * 9 // 10))


async def decoded(cast: PortalCastOnRig, test, timeout: float = 30) -> np.ndarray:
    """The receiver's latest decoded frame once `test` holds for it (the first frames of a cast may still be coming
    into focus at a low rate); the last frame seen when none does within `timeout` s."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    await cast.answerer.wait_frames(10, timeout=60)
    while not test(cast.answerer.last_frame) and loop.time() < end:
        await asyncio.sleep(0.2)
    return cast.answerer.last_frame


async def window_decoded(cast: PortalCastOnRig, timeout: float = 30) -> np.ndarray:
    return await decoded(cast, shows_the_window_alone, timeout)


@pytest.mark.timeout(300)
async def test_real_gnome_portal_shares_the_window_picked_in_its_dialog_and_restores_it(stack):
    rig = MutterRig(W, H, portal=True, shell=True, pattern_window=WINDOW)
    state = pathlib.Path(tempfile.mkdtemp(prefix="castd-portal-gnome-window-"))
    first = second = None
    clicks = 0

    def pick_window():
        nonlocal clicks
        clicks += 1
        rig.click(portal_dialog_accept(W, H, SHELL_PANEL))   # the first (only) window in the list, then Share

    try:
        rig.start()
        node = rig.screencast()   # the whole screen, read independently of castd
        assert not shows_the_window_alone(rig.grab(node, 1)[0])   # the screen is more than the window
        first = await PortalCastOnRig(stack, rig, state).start("--source", "window")
        # The dialog waits for a person: castd has not started before anyone clicks.
        assert not await first.wait_log("event=portal_started", 3), first.log[-3000:]
        assert await first.wait_log("event=portal_started", 90, while_waiting=pick_window), \
            first.log[-3000:] + "\n--- portal-gnome:\n" + rig.tail("portal-gnome", 20)
        assert clicks >= 1
        started = [l for l in first.log.splitlines() if "event=portal_started" in l]
        assert len(started) == 1 and "asked_for=window sharing=window" in started[0] \
            and 'restore_token="none saved"' in started[0] and "token_saved=true" in started[0], started
        print("castd (first start):", started[0])
        frame = await window_decoded(first)
        # The window's size, not the monitor-sized stream's: castd sends Mutter's crop alone.
        assert frame.shape == (WINDOW[1], WINDOW[0], 3), frame.shape
        assert shows_the_window_alone(frame), bar_colours(frame)
        sized = [l for l in first.log.splitlines() if "event=shared_window_size" in l]
        assert sized and "size=640x360 frame=640x360 placed=640x360+0+0" in sized[0], sized
        print("castd (first start):", sized[0])
        assert await first.stop() == 0, first.log[-3000:]

        # The window's token, in the window's own file (0600); the monitor's file is not written.
        token_file = state / "castd" / "screencast-restore-token-window"
        assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
        assert not (state / "castd" / "screencast-restore-token").exists()
        token = saved_token(token_file)
        assert token and token not in first.log
        saved = token_file.read_text().splitlines()
        assert saved[:2] == ["castd-restore-token 1", f"token={token}"] and "source_type=window" in saved \
            and f"size={W}x{H}" in saved, saved

        # The second start offers the token: the GNOME portal restores the same window, with no dialog and no click.
        clicks = 0
        second = await PortalCastOnRig(stack, rig, state).start("--source", "window", "--portal-timeout", "15")
        assert await second.wait_log("event=portal_started", 30), second.log[-3000:]
        assert clicks == 0
        restore = [l for l in second.log.splitlines() if "event=portal_restore" in l]
        assert restore == [f'level=info event=portal_restore restoring="the window shared last time ({W}x{H})"'], \
            restore
        started = [l for l in second.log.splitlines() if "event=portal_started" in l]
        assert len(started) == 1 and "asked_for=window sharing=window" in started[0] \
            and "restore_token=offered" in started[0] and "refused" not in started[0], started
        assert shows_the_window_alone(await window_decoded(second))
        rc, out, err = second.castd("status", "--json")
        casts = json.loads(out)["casts"]
        assert rc == 0 and len(casts) == 1 and casts[0]["sharing"] == f"window {W}x{H} through the portal", (out, err)
        assert token not in second.log

        # The window grows to 960x360: the receiver keeps its 640x360 frame, the window shrunk to 640x240 in it
        # between black bars (rows 60..300), not a new size.
        rig.procs["pattern"].send_signal(signal.SIGUSR1)
        letterboxed = lambda f: shows_the_window_alone(f, rows=(60, 300))   # noqa: E731
        frame = await decoded(second, letterboxed, 20)
        assert frame.shape == (WINDOW[1], WINDOW[0], 3), frame.shape
        assert letterboxed(frame), (bar_colours(frame[60:300]), second.log[-2000:])
        assert "size=960x360 frame=640x360 placed=640x240+0+60" in second.log, second.log[-2000:]

        # The window closes during the cast: the slate, then the cast ends as on X11: `shared_window_closed`,
        # disconnect `shared_window_closed`, exit 0, and the portal is not asked again.
        rig.procs["pattern"].terminate()
        assert await second.wait_log("event=shared_window_closed", 20), second.log[-3000:]
        assert is_slate(await decoded(second, is_slate, 5)), "no slate seen:\n" + second.log[-2000:]
        row = await second.answerer.signals.wait_row(lambda r: r["message_type"] == "disconnect", timeout=20)
        assert row["payload"] == {"reason": "shared_window_closed"}, second.log[-3000:]
        rc, _ = await second.daemon.wait(timeout=10)
        assert rc == 0, second.log[-3000:]
        assert "event=capture_source_ended" in second.log
        assert 'message="The shared window was closed, so the cast ended."' in second.log, second.log[-2000:]
        for never in ("event=capture_failed", "event=capture_needs_user"):
            assert never not in second.log, second.log[-3000:]
        assert len([l for l in second.log.splitlines() if "event=portal_restore" in l]) == 1
        assert token not in second.log
        print("castd (second start):", *[l for l in second.log.splitlines() if any(
            k in l for k in ("shared_window", "capture_", "source_ended", "event=finish"))], sep="\n  ")
    finally:
        for cast in (first, second):
            if cast:
                await cast.stop()
        rig.stop()
        shutil.rmtree(state, ignore_errors=True)


async def sampled(viewer: Viewer, x: int, y: int, want, timeout: float = 15) -> dict:
    """Chromium's canvas around (x, y) once it is `want` (within the decoder's and scaler's few percent); the last
    sample when it is not within `timeout` s."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        got = await viewer.sample(x - 4, y - 4, 8, 8)
        if (got and max(abs(got[k] - w) for k, w in zip("rgb", want)) <= 16) or loop.time() > end:
            return got
        await asyncio.sleep(0.2)


def is_near(got: dict | None, want) -> bool:
    return bool(got) and max(abs(got[k] - w) for k, w in zip("rgb", want)) <= 16


@pytest.mark.timeout(240)
async def test_chromium_viewer_shows_the_gnome_window_through_a_resize_until_it_closes(stack):
    """The real receiver on this path: the dashboard approves `castd pair`, the viewer in headless Chromium decodes
    castd's cast of the window picked in GNOME's dialog: 640x360, the window's bars edge to edge; after the window
    grows to 960x360, still 640x360 with black bars above and below; when it closes, the slate, then the viewer says
    `shared_window_closed` and castd exits 0."""
    rig = MutterRig(W, H, portal=True, shell=True, pattern_window=WINDOW)
    state = pathlib.Path(tempfile.mkdtemp(prefix="castd-portal-gnome-window-chromium-"))
    browser = await Chromium().start()
    daemon = None
    try:
        rig.start()
        dash = await Dashboard.open(browser, stack.dashboard)
        pairing = asyncio.create_task(run_castd(castd_env(stack, state), "pair", "--pin", dash.pin, "--json"))
        await dash.approve(resolution="1080p", frame_rate=30)
        rc, out, err = await pairing
        assert rc == 0, out + err
        viewer = await Viewer.open(browser, stack.api_url, dash.session_id)
        rig.give(state)   # `castd pair` ran as root: the credentials become the rig user's
        p = await asyncio.create_subprocess_exec(
            *rig.as_user([castd_binary(), "--session", dash.session_id, "--log-level", "debug", "--capture", "portal",
                          "--source", "window"]),
            env=rig.castd_env(castd_env(stack, state)), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        daemon = Daemon(p)
        loop = asyncio.get_running_loop()
        end = loop.time() + 90
        while not daemon.log_has("event=portal_started"):   # the dialog: pick the window, press Share
            assert loop.time() < end and p.returncode is None, "\n".join(daemon.stderr_lines[-30:])
            await asyncio.to_thread(rig.click, portal_dialog_accept(W, H, SHELL_PANEL))
            await asyncio.sleep(1)

        stats = await viewer.wait_frames(10, timeout=60)
        assert (stats["frameWidth"], stats["frameHeight"]) == WINDOW, stats
        y = int(WINDOW[1] * 0.3)
        for i, want in enumerate(BARS):   # the window's bars out to both edges: nothing else in the frame
            got = await sampled(viewer, int((i + 0.5) * WINDOW[0] / 7), y, want)
            assert is_near(got, want), (i, got, want)
        assert is_near(await sampled(viewer, 4, 4, BARS[0]), BARS[0])
        assert is_near(await sampled(viewer, WINDOW[0] - 4, 4, BARS[-1]), BARS[-1])

        # 960x360: shrunk to 640x240 at rows 60..300, black above and below, the receiver's size unchanged.
        rig.procs["pattern"].send_signal(signal.SIGUSR1)
        assert is_near(await sampled(viewer, 320, 30, (0, 0, 0)), (0, 0, 0)), daemon.stderr_lines[-10:]
        assert is_near(await sampled(viewer, 320, 340, (0, 0, 0)), (0, 0, 0))
        y = 60 + int(240 * 0.3)
        for i, want in enumerate(BARS):
            got = await sampled(viewer, int((i + 0.5) * WINDOW[0] / 7), y, want)
            assert is_near(got, want), (i, got, want)
        stats = await viewer.stats()
        assert (stats["frameWidth"], stats["frameHeight"]) == WINDOW, stats
        assert daemon.log_has("placed=640x240+0+60")

        # Closed: the slate, then the viewer is told why, and castd exits 0.
        rig.procs["pattern"].terminate()
        assert is_near(await sampled(viewer, 320, 30, GREY, timeout=5), GREY)
        await viewer.page.wait_for("window.castdViewer.message.includes('shared_window_closed')", timeout=15)
        rc, _ = await daemon.wait(timeout=10)
        assert rc == 0, "\n".join(daemon.stderr_lines[-30:])
        assert daemon.log_has("event=shared_window_closed") and daemon.log_has("event=capture_source_ended")
        assert not daemon.log_has("event=capture_needs_user")
    finally:
        if daemon:
            await daemon.kill()
        await browser.close()
        rig.stop()
        shutil.rmtree(state, ignore_errors=True)
