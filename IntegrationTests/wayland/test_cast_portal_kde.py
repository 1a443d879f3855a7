"""castd through the REAL KDE ScreenCast portal on a headless KWin (issue #31): `kwin_wayland --virtual`,
xdg-desktop-portal with xdg-desktop-portal-kde 5.27 (castkit/kwin_rig.py).

KDE's dialog cannot be accepted by a test here (its screen cards have no accessible action and nothing injects input
into KWin: docs/wayland.md, "KDE Plasma"). So the first test gives the portal what a person's "Share" with "Allow
restoring on future sessions" leaves behind, a restore token in the permission store naming KWin's output, saved
where castd keeps its token: castd offers it, the KDE portal starts the cast with no dialog, the receiver decodes
the picture KWin composites; on KWin 5.27.5 --virtual it xfails there, because KWin sends no frame
(everything before the frames is asserted). The second shows the dialog itself: without a token, KDE's "Screen Sharing" dialog is
open (read through AT-SPI) while castd waits, and castd gives up after --portal-timeout with `capture_needs_user`.

Long rows (CASTD_LONG=1): the KDE packages are not in Scripts/bootstrap, and the rig takes a minute.
"""
from __future__ import annotations

import asyncio
import os
import pathlib
import shutil
import stat
import tempfile
import uuid

import pytest

from castkit.kwin_rig import KWinRig, missing_kde
from castkit.mutter_rig import missing_tools
from castkit.portal_cast import PortalCastOnRig
from castkit.xscreen import bar_colours, bars_match

pytestmark = [pytest.mark.long,
              pytest.mark.skipif(bool(missing_tools() + missing_kde()),
                                 reason=f"KWin rig or KDE portal missing (Debian packages): "
                                        f"{', '.join(missing_tools() + missing_kde())}")]

W, H = 1280, 720


@pytest.mark.timeout(240)
async def test_real_kde_portal_restores_a_granted_screen_and_the_receiver_decodes_kwin(stack):
    rig = KWinRig(W, H)
    state = pathlib.Path(tempfile.mkdtemp(prefix="castd-portal-kde-"))
    cast = None
    try:
        rig.start()
        token = str(uuid.uuid4())
        rig.grant(token, "0x0")
        cast = await PortalCastOnRig(stack, rig, state).start(saved_token=token)
        assert await cast.wait_log("event=portal_started", 60), \
            cast.log[-3000:] + "\n--- portal-kde:\n" + rig.tail("portal-kde", 20)
        assert rig.dialog() == []   # no dialog was needed
        try:
            await cast.answerer.wait_frames(30, timeout=30)
        except asyncio.TimeoutError:
            # The blocker on KWin 5.27.5 --virtual (docs/wayland.md): the stream negotiates and streams, and KWin never
            # fills a buffer. Anything else is a failure.
            stats = [line for line in cast.log.splitlines() if "event=stats" in line]
            assert cast.daemon.proc.returncode is None and stats, cast.log[-3000:]
            assert all(" captured=0 " in line for line in stats), stats[-1]
            pytest.xfail("KWin 5.27 --virtual: the portal stream is granted and negotiated, but KWin sends no frame "
                         f"(castd captured=0 for {len(stats)} stats periods)")
        frame = cast.answerer.last_frame
        assert frame.shape == (H, W, 3)
        assert bars_match(frame, tolerance=3), bar_colours(frame)
        assert await cast.stop() == 0, cast.log[-3000:]
        started = [line for line in cast.log.splitlines() if "event=portal_started" in line]
        assert len(started) == 1 and "restore_token=offered" in started[0] and "refused" not in started[0], started
        assert "token_saved=true" in started[0], started
        # The KDE portal hands a token back (persist_mode 2 honoured); castd keeps it 0600 and never logs it.
        token_file = state / "castd" / "screencast-restore-token"
        assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
        assert token_file.read_text().strip() and token not in cast.log
    finally:
        if cast:
            await cast.stop()
        rig.stop()
        shutil.rmtree(state, ignore_errors=True)


@pytest.mark.timeout(120)
async def test_real_kde_portal_dialog_is_shown_and_nobody_accepts_it(stack):
    rig = KWinRig(W, H)
    state = pathlib.Path(tempfile.mkdtemp(prefix="castd-portal-kde-"))
    cast = None
    try:
        rig.start()
        assert rig.dialog() == []
        cast = await PortalCastOnRig(stack, rig, state).start("--portal-timeout", "15")
        loop = asyncio.get_running_loop()
        end = loop.time() + 15
        while not (shown := await asyncio.to_thread(rig.dialog)):
            assert loop.time() < end and cast.daemon.proc.returncode is None, "no dialog:\n" + cast.log[-2000:]
            await asyncio.sleep(0.5)
        assert shown[0]["title"] == "Screen Sharing", shown
        assert "Press" in shown[0]["buttons"]["Share"] and "Press" in shown[0]["buttons"]["Cancel"], shown
        # The screen cards (KWin's output, a virtual output to create) have no accessible action to pick one with.
        assert shown[0]["cards"] and all(actions == [] for actions in shown[0]["cards"]), shown
        assert "event=portal_started" not in cast.log
        row = await cast.answerer.signals.wait_row(lambda r: r["message_type"] == "disconnect", timeout=60)
        assert row["payload"] == {"reason": "capture_needs_user"}, cast.log[-3000:]
        rc, _ = await cast.daemon.wait(timeout=10)
        assert rc == 1, cast.log[-3000:]
        assert "event=capture_needs_user" in cast.log and "event=portal_started" not in cast.log
        assert not (state / "castd" / "screencast-restore-token").exists()
    finally:
        if cast:
            await cast.stop()
        rig.stop()
        shutil.rmtree(state, ignore_errors=True)
