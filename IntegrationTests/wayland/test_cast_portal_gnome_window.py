"""castd `--capture portal --source window` through the REAL GNOME ScreenCast portal (issue 31): xdg-desktop-portal
with xdg-desktop-portal-gnome 43 on a headless GNOME Shell rig (castkit/mutter_rig.py, `shell=True`; the portal lists
windows from GNOME Shell's org.gnome.Shell.Introspect, which plain Mutter does not serve). The pattern is drawn in an
undecorated 640x360 window in the middle of the 1280x720 screen, on GNOME Shell's blue background under its top bar.
castd asks for a window (`types` 2); the portal's "Screen Share" dialog lists "castd pattern", and the test picks it
and presses Share with pointer clicks through org.gnome.Mutter.RemoteDesktop. The receiver decodes the window's
picture alone (in the stream's top-left corner, black around it: Mutter's window stream is monitor-sized and castd
does not read its crop; nothing of the screen shows), castd logs `asked_for=window sharing=window`, and the window's
restore token is saved in its own file (0600). The second start offers the token and the portal restores the window
with no dialog. Then the window closes during the cast: castd asks the portal again, its dialog has no window to
offer, and castd ends with `capture_needs_user` after --portal-timeout (what castd does today; see the comment)."""
from __future__ import annotations

import asyncio
import json
import os
import pathlib
import shutil
import stat
import tempfile

import numpy as np
import pytest

from castkit.mutter_rig import SHELL_PANEL, MutterRig, missing_portal, missing_shell, missing_tools, \
    portal_dialog_accept
from castkit.portal_cast import PortalCastOnRig, saved_token
from castkit.xscreen import bar_colours, bars_match

MISSING = missing_tools() + missing_portal() + missing_shell()
pytestmark = [pytest.mark.long,
              pytest.mark.skipif(bool(MISSING), reason=f"GNOME Shell rig or portal missing (Debian packages; "
                                                       f"gnome-shell is not in Scripts/bootstrap): {MISSING}")]

W, H = 1280, 720
WINDOW = (640, 360)
GREY = (64, 64, 64)   # the pattern's bottom third
DIALOG = (250, 250, 250)   # the body of the portal's dialog (xdg-desktop-portal-gnome 43, GTK 4's light theme)


def near(px, want, tolerance=6) -> bool:
    return max(abs(int(g) - w) for g, w in zip(px, want)) <= tolerance


def window_part(frame: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The decoded frame's part where the shared window is, and the mask of the rest. Mutter 43's window stream is
    the size of the monitor (1280x720 here) with the window's picture at its top-left corner and the rest black; it
    says where the window is in SPA_META_VideoCrop, which castd does not read (yet), so castd sends the whole
    stream."""
    h, w, _ = frame.shape
    wh, ww = round(WINDOW[1] * h / H), round(WINDOW[0] * w / W)
    rest = np.ones((h, w), dtype=bool)
    rest[:wh + 8, :ww + 8] = False   # a margin for the encoder's blur at the edge
    return frame[:wh, :ww], rest


def shows_the_window_alone(frame: np.ndarray) -> bool:
    """The pattern's bars and its grey bottom third out to both edges in the window's part, and black around it: the
    window's picture, and nothing of the screen (GNOME Shell's blue background, its top bar, the portal's dialog)."""
    part, rest = window_part(frame)
    h, w, _ = part.shape
    return bars_match(part, tolerance=6) and near(part[int(h * 0.9), int(w * 0.02)], GREY) \
        and near(part[int(h * 0.9), int(w * 0.98)], GREY) and int(frame[rest].max()) <= 24


async def window_decoded(cast: PortalCastOnRig, timeout: float = 30) -> np.ndarray:
    """The receiver's latest decoded frame once it shows the window alone (the first frames of a cast may still be
    coming into focus at a low rate); the last frame seen when none does within `timeout` s."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    await cast.answerer.wait_frames(10, timeout=60)
    while not shows_the_window_alone(cast.answerer.last_frame) and loop.time() < end:
        await asyncio.sleep(0.5)
    return cast.answerer.last_frame


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
        assert frame.shape == (H, W, 3), frame.shape   # the stream's size: the monitor's, not the window's
        assert shows_the_window_alone(frame), bar_colours(window_part(frame)[0])
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

        # The window closes during the cast. What castd does on the portal path today: the PipeWire stream's end is
        # a failed capture generation (not "the shared window closed", as on X11), so castd closes the portal
        # session and asks the portal again with the saved token; the GNOME portal cannot restore a window that is
        # gone and shows its dialog, with an empty window list; nobody is there, and after --portal-timeout castd
        # sends disconnect `capture_needs_user` and exits 1.
        rig.procs["pattern"].terminate()
        assert await second.wait_log("the screen stream ended", 20), second.log[-3000:]
        loop = asyncio.get_running_loop()
        end = loop.time() + 10
        while not near((await asyncio.to_thread(rig.grab, node, 1))[0][H // 2 + 60, W // 2], DIALOG):   # the dialog's empty list
            assert loop.time() < end, "no dialog seen:\n" + second.log[-2000:]
        row = await second.answerer.signals.wait_row(lambda r: r["message_type"] == "disconnect", timeout=60)
        assert row["payload"] == {"reason": "capture_needs_user"}, second.log[-3000:]
        rc, _ = await second.daemon.wait(timeout=10)
        assert rc == 1, second.log[-3000:]
        assert "event=capture_failed" in second.log and "event=capture_needs_user" in second.log
        assert len([l for l in second.log.splitlines() if "event=portal_restore" in l]) == 2
        assert token not in second.log
    finally:
        for cast in (first, second):
            if cast:
                await cast.stop()
        rig.stop()
        shutil.rmtree(state, ignore_errors=True)
