"""castd through the REAL ScreenCast portal of wlroots (issue 31): a headless Sway with xdg-desktop-portal-wlr 0.7
(castkit/sway_rig.py, which says exactly what the rig works around: portal-wlr 0.7 refuses to cast unless screencopy
announced a DMA-BUF format, which Sway's software renderer never does, so an LD_PRELOAD shim in the portal only,
castkit/xdpw_shm_shim.c, hands the portal's own handler that announcement and the portal casts from shared memory). The first `castd --capture portal` casts the monitor to an aiortc receiver (the rig's test picture checked
in decoded pixels) and saves the restore token with what the portal said it was; the second start offers it, says
what it restores, and the portal restores from its own restore data (its log says so); a third start with
`--forget-source` deletes the token first and offers none.

A long row (`-m long`, CASTD_LONG=1; the full fault set runs it): CI does not install Sway. When Sway or the portal is
missing the rig installs them with apt-get as root (the long set's machines), else the test is skipped saying why."""
from __future__ import annotations

import asyncio
import os
import pathlib
import shutil
import stat
import tempfile

import pytest

from castkit import sway_rig
from castkit.mutter_rig import missing_tools
from castkit.portal_cast import PortalCastOnRig, saved_token
from castkit.xscreen import bar_colours, bars_match

W, H = 1280, 720


@pytest.mark.long
@pytest.mark.timeout(600)
async def test_headless_sway_portal_casts_the_monitor_and_restores_it(stack):
    if sway_rig.missing():
        how = sway_rig.install_packages()
        if sway_rig.missing():
            pytest.skip(f"Sway rig missing {sway_rig.missing()} ({how})")
    if missing_tools():
        pytest.skip(f"rig tools missing: {missing_tools()}")
    rig = sway_rig.SwayRig(W, H)
    state = pathlib.Path(tempfile.mkdtemp(prefix="castd-portal-wlr-"))
    first = second = third = None
    try:
        rig.start()
        # First start: no token; portal-wlr's chooser is off (output_name), so there is no dialog to accept.
        first = await PortalCastOnRig(stack, rig, state).start()
        assert await first.wait_log("event=portal_started", 30), \
            first.log[-3000:] + "\n--- portal-wlr:\n" + rig.tail("portal-wlr", 30)
        await first.answerer.wait_frames(30, timeout=60)
        frame = first.answerer.last_frame
        assert frame.shape == (H, W, 3)
        assert bars_match(frame, tolerance=3), bar_colours(frame)
        # The frame rate the receiver decodes over 5 s (the pattern animates at 30 fps; the receiver asked for 30).
        n0, t0 = len(first.answerer.frames), asyncio.get_running_loop().time()
        await asyncio.sleep(5)
        fps = (len(first.answerer.frames) - n0) / (asyncio.get_running_loop().time() - t0)
        print(f"decoded at the receiver: {fps:.1f} fps")
        assert fps >= 10, fps
        assert await first.stop() == 0, first.log[-3000:]
        started = [l for l in first.log.splitlines() if "event=portal_started" in l]
        assert len(started) == 1 and "none saved" in started[0] and "token_saved=true" in started[0] \
            and 'stream="monitor 1280x720 at 0,0"' in started[0], started
        print("first start:", started[0])

        token_file = state / "castd" / "screencast-restore-token"
        assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
        token = saved_token(token_file)
        assert token and token not in first.log
        saved = token_file.read_text().splitlines()
        assert "source_type=monitor" in saved and f"size={W}x{H}" in saved and "position=0,0" in saved, saved

        # Second start: the token offered, what it restores said, and the portal restores from its restore data.
        restored_before = rig.tail("portal-wlr", 10_000).count("restore data available")
        second = await PortalCastOnRig(stack, rig, state).start()
        assert await second.wait_log("event=portal_started", 30), second.log[-3000:]
        await second.answerer.wait_frames(30, timeout=60)
        assert bars_match(second.answerer.last_frame, tolerance=3), bar_colours(second.answerer.last_frame)
        assert await second.stop() == 0, second.log[-3000:]
        restore = [l for l in second.log.splitlines() if "event=portal_restore" in l]
        assert len(restore) == 1 and f'restoring="the monitor shared last time ({W}x{H} at 0,0)"' in restore[0], restore
        started = [l for l in second.log.splitlines() if "event=portal_started" in l]
        assert len(started) == 1 and "restore_token=offered" in started[0] and "refused" not in started[0], started
        assert rig.tail("portal-wlr", 10_000).count("restore data available") == restored_before + 1, \
            rig.tail("portal-wlr", 40)
        assert token not in second.log
        print("second start:", restore[0], "|", started[0])

        # Third start with --forget-source: the token is deleted before the portal is asked, so none is offered.
        third = await PortalCastOnRig(stack, rig, state).start("--forget-source")
        assert await third.wait_log("event=portal_started", 30), third.log[-3000:]
        await third.answerer.wait_frames(10, timeout=60)
        assert await third.stop() == 0, third.log[-3000:]
        forgotten = [l for l in third.log.splitlines() if "event=source_forgotten" in l]
        assert len(forgotten) == 1 and f"Forgot the monitor shared last time ({W}x{H} at 0,0)" in forgotten[0], forgotten
        started = [l for l in third.log.splitlines() if "event=portal_started" in l]
        assert "event=portal_restore" not in third.log and len(started) == 1 and "none saved" in started[0], started
        assert saved_token(token_file) and token not in third.log
        print("third start:", forgotten[0])
    finally:
        for cast in (first, second, third):
            if cast:
                await cast.stop()
        rig.stop()
        shutil.rmtree(state, ignore_errors=True)
