"""castd --capture mutter when GNOME closes the cast mid-stream (its monitor went away): a real headless Mutter
never does that on request, so a stand-in org.gnome.Mutter.ScreenCast (castkit/mutter_standin.py) on a private session
bus hands out a REAL PipeWire node (castd-pattern's picture) and closes the session when the test says. castd must
log why in words, open a new session, and keep the receiver's picture coming."""
import asyncio
import json
import subprocess

import numpy as np
import pytest

from castkit.castd_proc import answered_cast, castd_env
from castkit.wayland_standin import HERE, StandInScreenCast, expected_picture, installed

pytestmark = pytest.mark.skipif(not installed(), reason="pipewire, wireplumber or dbus-daemon missing (Scripts/bootstrap)")


@pytest.mark.timeout(120)
async def test_a_session_closed_by_gnome_is_reported_and_reopened(stack, tmp_path):
    screen = await StandInScreenCast(640, 480).start()
    log = screen.dir / "mutter.jsonl"
    mutter = screen._spawn(["/usr/bin/python3", str(HERE / "mutter_standin.py"), "--bus", screen.bus,
                            "--node", str(screen.node), "--log", str(log)], "mutter", stdout=subprocess.PIPE)
    assert await screen._line(mutter) == "ready"
    env = castd_env(stack, tmp_path, **screen.env())
    env.pop("DISPLAY", None)
    try:
        async with answered_cast(stack, tmp_path, env, "--capture", "mutter") as (answerer, daemon):
            await answerer.wait_frames(10, timeout=60)
            await daemon.wait_log("event=mutter_cast")
            subprocess.run(["dbus-send", f"--bus={screen.bus}", "--print-reply", "--dest=org.gnome.Mutter.ScreenCast",
                            "/org/gnome/Mutter/ScreenCast", "org.castd.StandIn.CloseAll"], check=True, capture_output=True)
            await daemon.wait_log("event=capture_ended", timeout=10)

            async def reopened():
                while sum("event=mutter_cast" in l for l in daemon.stderr_lines) < 2:
                    await asyncio.sleep(0.05)
            await asyncio.wait_for(reopened(), 15)
            seen = len(answerer.frames)
            await answerer.wait_frames(seen + 10, timeout=30)   # the picture keeps coming through the new session
            frame = answerer.last_frame
            daemon.signal()
            rc, _ = await daemon.wait(timeout=10)
            assert rc == 0
            calls = [json.loads(l)["call"] for l in log.read_text().splitlines()]
    finally:
        screen.stop()
    text = "\n".join(daemon.stderr_lines)
    ended = [l for l in daemon.stderr_lines if "event=capture_ended" in l]
    assert len(ended) == 1 and "GNOME closed the screen-cast session /org/gnome/Mutter/ScreenCast/Session/u1" in ended[0], text
    err = float(np.abs(frame[4:].astype(int) - expected_picture(640, 480)[4:].astype(int)).mean())
    assert err < 6, f"mean absolute error {err:.2f}"
    # Two sessions; the one GNOME closed is not stopped again, the second is stopped when castd ends.
    assert calls.count("CreateSession") == 2 and calls.count("Stop") == 1, calls
