"""Issue 31: one window cast to headless Chromium on X11 (XComposite), checked in decoded pixels.

An Xvfb screen with castd's animated bars on the root, two plain windows above it (castkit/xwindows.py:
'Slides — Impress' magenta, 'Mail' green, opened later so it covers part of Slides). `castd doctor
--json` lists both and the screen's output; `castd --session … --window slides` casts Slides alone:
its magenta fills the 640x360 frame and neither the green nor the bars show, also where Mail covers
it, when Mail covers it completely, and when Slides is moved half off the screen. Resized to
1280x360 the frame stays 640x360 and the window is drawn at 640x180 between black bars (aspect
kept). Unmapped (as a minimise does): the grey slate, and the cast goes on; mapped again: magenta.
Closed: the receiver sees the slate, then disconnect shared_window_closed, and castd exits 0."""
import asyncio
import json
import os

import pytest

from castkit.castd_proc import chromium_cast, run_castd
from castkit.xscreen import XScreen
from castkit.xwindows import XWindows

MAGENTA, GREEN, SLATE, BLACK = (200, 40, 160), (40, 200, 60), (64, 64, 64), (0, 0, 0)
FRAME = (640, 360)


def near(got, want, tol=18) -> bool:
    return got is not None and max(abs(got[k] - w) for k, w in zip("rgb", want)) <= tol


async def until_colour(viewer, x, y, want, timeout=10.0, size=8):
    """Waits until the decoded picture shows `want` around (x, y); returns the last sample."""
    got = None
    for _ in range(int(timeout / 0.1)):
        got = await viewer.sample(x - size // 2, y - size // 2, size, size)
        if near(got, want):
            return got
        await asyncio.sleep(0.1)
    raise AssertionError(f"({x},{y}) is {got}, not {want}")


async def assert_whole_window(viewer, colour=MAGENTA):
    """Every sampled point of the frame shows the window's colour (no bars, no green)."""
    for x in range(40, FRAME[0], 80):
        for y in range(30, FRAME[1], 75):
            got = await viewer.sample(x - 4, y - 4, 8, 8)
            assert near(got, colour), ((x, y), got)


@pytest.mark.timeout(240)
async def test_one_window_cast_follows_the_window_and_ends_when_it_closes(stack, tmp_path):
    screen = await XScreen(1280, 720).start()
    windows = XWindows(screen.display)
    slides = windows.open("Slides — Impress", 100, 100, *FRAME, MAGENTA)
    windows.open("Mail", 400, 250, 500, 300, GREEN)   # covers Slides from (300,150) in its own coordinates

    env = dict(os.environ, DISPLAY=screen.display, DBUS_SESSION_BUS_ADDRESS="unix:path=/nonexistent/castd-bus")
    env.pop("WAYLAND_DISPLAY", None)
    rc, out, err = await run_castd(env, "doctor", "--json")
    assert rc == 0, err
    doctor = json.loads(out)
    listed = {w["title"]: w for w in doctor["windows"]}
    assert set(listed) == {"Slides — Impress", "Mail"}, doctor["windows"]
    assert listed["Slides — Impress"]["id"] == hex(slides)
    assert (listed["Mail"]["width"], listed["Mail"]["height"], listed["Mail"]["x"]) == (500, 300, 400)
    assert [(o["name"], o["width"], o["height"]) for o in doctor["outputs"]] == [("screen", 1280, 720)]
    rc, text, _ = await run_castd(env, "doctor")
    assert f"share window: {hex(slides)} 'Slides — Impress' 640x360+100+100 (--window {hex(slides)})" in text, text

    try:
        async with chromium_cast(stack, tmp_path, screen=screen, castd_args=("--window", "slides")) as (viewer, daemon):
            stats = await viewer.wait_frames(10, timeout=60)
            assert (stats["frameWidth"], stats["frameHeight"]) == FRAME
            await until_colour(viewer, 320, 180, MAGENTA)
            await assert_whole_window(viewer)   # the covered quarter too
            assert daemon.log_has("backend=xcomposite") and daemon.log_has("sharing=\"window 'Slides — Impress'")
            # castd status names the window the capture opened (title and id), not the query.
            rc, out, err = await run_castd(env, "status", "--json")
            assert rc == 0, err
            assert [c["sharing"] for c in json.loads(out)["casts"]] == \
                [f"window 'Slides — Impress' {hex(slides)} of screen {screen.display}"], out

            # Covered completely by Mail, then moved half off the screen: still whole.
            windows.move("Mail", 50, 50)
            windows.resize("Mail", 900, 600)
            await asyncio.sleep(1.0)
            await assert_whole_window(viewer)
            windows.move("Slides — Impress", 1000, 500)
            await asyncio.sleep(1.0)
            await assert_whole_window(viewer)

            # Twice as wide: the same frame, the window 640x180 between black bars (rows 90..270).
            windows.resize("Slides — Impress", 1280, 360)
            await until_colour(viewer, 320, 40, BLACK)
            assert near(await viewer.sample(316, 316, 8, 8), BLACK)
            for y in (100, 180, 260):
                assert near(await viewer.sample(20, y - 4, 8, 8), MAGENTA), y
            for y in (75, 285):
                assert near(await viewer.sample(316, y - 4, 8, 8), BLACK), y
            after = await viewer.stats()
            assert (after["frameWidth"], after["frameHeight"]) == FRAME   # no new size for the receiver
            assert daemon.log_has("event=shared_window_size") and daemon.log_has("placed=640x180+0+90")

            # Unmapped (a minimise): the slate, and the cast goes on; mapped again: the window.
            windows.unmap("Slides — Impress")
            await until_colour(viewer, 320, 180, SLATE)
            before = (await viewer.stats())["framesDecoded"]
            await asyncio.sleep(2.5)   # the slate is refreshed under a second apart: frames keep coming
            assert (await viewer.stats())["framesDecoded"] > before
            assert daemon.log_has("event=shared_window_hidden")
            windows.map("Slides — Impress")
            await until_colour(viewer, 320, 180, MAGENTA)

            # Closed: the slate reaches the receiver (not a frozen picture), then the cast ends cleanly.
            windows.close("Slides — Impress")
            await until_colour(viewer, 320, 180, SLATE, timeout=1.9, size=16)
            await viewer.page.wait_for("window.castdViewer.message.includes('shared_window_closed')", timeout=15)
            rc, _ = await daemon.wait(timeout=10)
            events = await viewer.events()
    finally:
        windows.shut()
    print("CASTD\n" + "\n".join(l for l in daemon.stderr_lines
                                  if any(k in l for k in ("capture_", "shared_window", "source_ended", "scaling", "media_stopped"))))
    assert any(e.get("event") == "disconnect" and e.get("reason") == "shared_window_closed" for e in events), events[-10:]
    assert rc == 0, "\n".join(daemon.stderr_lines[-20:])
    assert daemon.log_has("event=shared_window_closed") and daemon.log_has("event=capture_source_ended")


async def test_an_unknown_window_is_one_sentence_naming_the_windows_before_signing_in():
    screen = await XScreen(640, 480).start(animate=False)
    windows = XWindows(screen.display)
    try:
        ids = [windows.open(t, 10, 10, 100, 80, GREEN) for t in ("Mail", "Mail 2")]
        env = {k: v for k, v in os.environ.items() if not k.startswith("CASTD_")}
        env["DISPLAY"] = screen.display
        session = "00000000-0000-0000-0000-000000000000"
        unknown = await run_castd(env, "--session", session, "--window", "Slides")
        ambiguous = await run_castd(env, "--session", session, "--window", "mail")
        output = await run_castd(env, "--session", session, "--output", "HDMI-9")
    finally:
        windows.shut()
        screen.stop()
    listing = f"{hex(ids[0])} 'Mail' 100x80+10+10, {hex(ids[1])} 'Mail 2' 100x80+10+10"
    assert unknown[0] == 2 and unknown[2].strip().endswith(f"castd: no window matches --window 'Slides'; the windows are: {listing}"), unknown
    assert ambiguous[0] == 2 and f"--window 'mail' matches 2 windows ({listing})" in ambiguous[2], ambiguous
    assert output[0] == 2 and "X11 has no output named 'HDMI-9'; its outputs are: screen 640x480+0+0" in output[2], output
