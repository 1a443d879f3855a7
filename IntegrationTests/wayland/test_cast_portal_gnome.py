"""castd through the REAL ScreenCast portal on the headless Mutter rig (issue #9): xdg-desktop-portal with
xdg-desktop-portal-gnome on the rig's session bus. The first `castd --capture portal` makes the GNOME portal show its
"Screen Share" dialog on the rig's screen; the test accepts it with pointer clicks through
org.gnome.Mutter.RemoteDesktop, castd saves the restore token (0600) and the receiver decodes the rig's picture. A
second castd start offers the token and captures with no dialog and no click. And when nobody clicks, castd gives
up after --portal-timeout with disconnect reason `capture_needs_user` and exit 1."""
from __future__ import annotations

import asyncio
import os
import pathlib
import shutil
import stat
import tempfile

import pytest

from castkit.xscreen import bar_colours, bars_match
from castkit.mutter_rig import MutterRig, missing_portal, missing_tools, portal_dialog_accept
from castkit.portal_cast import PortalCastOnRig

pytestmark = pytest.mark.skipif(bool(missing_tools() + missing_portal()),
                                reason=f"rig or portal missing: {missing_tools() + missing_portal()}")

W, H = 1280, 720


@pytest.mark.timeout(240)
async def test_real_gnome_portal_dialog_accepted_then_restore_token_skips_it(stack):
    rig = MutterRig(W, H, portal=True)
    state = pathlib.Path(tempfile.mkdtemp(prefix="castd-portal-gnome-"))
    first = second = None
    clicks = 0

    def accept():
        nonlocal clicks
        clicks += 1
        rig.click(portal_dialog_accept(W, H))

    try:
        rig.start()
        first = await PortalCastOnRig(stack, rig, state).start()
        # The dialog waits for a person: castd has not started before anyone clicks.
        assert not await first.wait_log("event=portal_started", 3), first.log[-3000:]
        assert await first.wait_log("event=portal_started", 90, while_waiting=accept), \
            first.log[-3000:] + "\n--- portal-gnome:\n" + rig.tail("portal-gnome", 20)
        assert clicks >= 1
        await first.answerer.wait_frames(30, timeout=60)
        frame = first.answerer.last_frame
        assert frame.shape == (H, W, 3)
        assert bars_match(frame, tolerance=3), bar_colours(frame)   # the dialog is gone: only the picture is left
        assert await first.stop() == 0, first.log[-3000:]
        started = [l for l in first.log.splitlines() if "event=portal_started" in l]
        assert len(started) == 1 and "none saved" in started[0] and "token_saved=true" in started[0], started

        token_file = state / "castd" / "screencast-restore-token"
        assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
        first_token = token_file.read_text().strip()
        assert first_token and first_token not in first.log

        # The second start: the token is offered, the portal answers at once, nobody clicks.
        second = await PortalCastOnRig(stack, rig, state).start()
        assert await second.wait_log("event=portal_started", 30), second.log[-3000:]
        await second.answerer.wait_frames(30, timeout=60)
        assert bars_match(second.answerer.last_frame, tolerance=3), bar_colours(second.answerer.last_frame)
        assert await second.stop() == 0, second.log[-3000:]
        started = [l for l in second.log.splitlines() if "event=portal_started" in l]
        assert len(started) == 1 and "restore_token=offered" in started[0] and "refused" not in started[0], started
        # Saved again after the second start (xdg-desktop-portal 1.16 hands back the same token for the same grant).
        assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600 and token_file.read_text().strip()
        assert first_token not in second.log
    finally:
        for cast in (first, second):
            if cast:
                await cast.stop()
        rig.stop()
        shutil.rmtree(state, ignore_errors=True)


@pytest.mark.timeout(120)
async def test_real_gnome_portal_dialog_nobody_accepts_ends_the_cast_with_a_reason(stack):
    """Nobody clicks, and the saved token is one the portal does not know (stale): the GNOME portal does not refuse it
    but shows its dialog. After --portal-timeout castd closes the portal session (the dialog goes away), sends
    disconnect `capture_needs_user`, and exits 1 with a sentence that says the token was not accepted."""
    rig = MutterRig(W, H, portal=True)
    state = pathlib.Path(tempfile.mkdtemp(prefix="castd-portal-gnome-"))
    cast = None
    try:
        rig.start()
        stale = "00000000-0000-4000-8000-000000000000"
        node = rig.screencast()   # to look at the screen independently of castd
        cast = await PortalCastOnRig(stack, rig, state).start("--portal-timeout", "10", saved_token=stale)
        # The dialog shows up on the screen (it covers the middle bars) while castd waits.
        loop = asyncio.get_running_loop()
        end = loop.time() + 10
        while bars_match((await asyncio.to_thread(rig.grab, node, 1))[0], tolerance=3):
            assert loop.time() < end and cast.daemon.proc.returncode is None, "no dialog seen:\n" + cast.log[-2000:]
        row = await cast.answerer.signals.wait_row(lambda r: r["message_type"] == "disconnect", timeout=60)
        assert row["payload"] == {"reason": "capture_needs_user"}, cast.log[-3000:]
        rc, _ = await cast.daemon.wait(timeout=10)
        assert rc == 1, cast.log[-3000:]
        assert "event=capture_needs_user" in cast.log and "nobody is there" in cast.log
        assert "did not accept the saved restore token" in cast.log and stale not in cast.log
        assert "event=portal_started" not in cast.log
        assert (state / "castd" / "screencast-restore-token").read_text().strip() == stale   # nothing new saved
        # The portal session ended with castd (closed, and castd left the bus): no dialog is left on the screen
        # (a grab independent of castd).
        assert bars_match(rig.grab(node, 1)[0], tolerance=3)
    finally:
        if cast:
            await cast.stop()
        rig.stop()
        shutil.rmtree(state, ignore_errors=True)
