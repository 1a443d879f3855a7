"""The main job end to end on the local stack (run by Scripts/demo):

local stack → a virtual screen (Xvfb + castd's test picture) unless DISPLAY is set, or
with --wayland a headless GNOME Mutter session (castd runs inside it and captures
through org.gnome.Mutter.ScreenCast) →
the receiver's /dashboard in headless Chromium → `castd pair --pin` → Approve →
`castd --session` → the /viewer/:id page decodes the cast → a screenshot and the
receiver's figures → SIGTERM → everything stopped.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile

os.environ.setdefault("CASTD_BUILD", "release")

from castkit.devstack import devstack_down, devstack_up  # noqa: E402
from castkit.chromium import Chromium  # noqa: E402
from castkit.receiver_pages import Dashboard, Viewer  # noqa: E402
from castkit.castd_proc import Daemon, castd_binary, castd_env, run_castd  # noqa: E402
from castkit.xscreen import XScreen  # noqa: E402
from castkit.mutter_rig import MutterRig  # noqa: E402


def say(text: str) -> None:
    print(f"demo: {text}", flush=True)


async def main(args) -> int:
    out_dir = pathlib.Path(args.out).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    state_home = pathlib.Path(tempfile.mkdtemp(prefix="castd-demo-state-"))
    say("starting the local stack (PostgreSQL, gateway, Realtime, receiver pages)")
    stack = devstack_up()
    screen = None
    rig = None
    browser = None
    daemon = None
    try:
        extra = {}
        if args.wayland:
            w, h = (int(v) for v in args.size.split("x"))
            rig = MutterRig(w, h).start()
            say(f"headless GNOME Mutter at {w}x{h} with castd's test picture, as user {rig.account.pw_name}")
        elif args.use_display and os.environ.get("DISPLAY"):
            say(f"casting the existing display {os.environ['DISPLAY']}")
        else:
            w, h = (int(v) for v in args.size.split("x"))
            screen = await XScreen(w, h).start()
            extra["DISPLAY"] = screen.display
            say(f"virtual screen {screen.display} at {w}x{h} with castd's test picture")
        # Host candidates with real addresses: hiding them behind mDNS names would make
        # Chromium multicast onto the real network (castkit/chromium.py refuses it here).
        browser = await Chromium(hide_mdns=False).start()
        dash = await Dashboard.open(browser, stack.dashboard)
        say(f"the receiver shows PIN {dash.pin[:3]} {dash.pin[3:]} (session {dash.session_id})")
        await dash.page.screenshot(out_dir / "dashboard.png")
        env = castd_env(stack, state_home, **extra)
        pairing = asyncio.create_task(run_castd(env, "pair", "--pin", dash.pin))
        await dash.approve(resolution="1080p", frame_rate=30)
        rc, out, err = await pairing
        print(out, end="", flush=True)
        if rc != 0:
            say(f"pairing failed: {err.strip()}")
            return 1
        viewer = await Viewer.open(browser, stack.api_url, dash.session_id)
        if rig:
            rig.give(state_home)
            p = await asyncio.create_subprocess_exec(
                *rig.as_user([castd_binary(), "--session", dash.session_id, "--capture", "mutter"]),
                env=rig.castd_env(env), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            daemon = Daemon(p)
        else:
            daemon = await Daemon.start(env, dash.session_id)
        say(f"castd --session {dash.session_id} is casting; streaming for {args.seconds} s")
        await viewer.wait_frames(5, timeout=40)
        await asyncio.sleep(args.seconds)
        stats = await viewer.stats()
        shot = await viewer.page.screenshot(out_dir / "viewer.png")
        say(f"viewer screenshot: {shot}")
        figures = {k: stats.get(k) for k in ("codec", "frameWidth", "frameHeight", "framesPerSecond", "framesDecoded",
                                           "packetsLost", "jitterBufferDelayMs", "roundTripTimeMs") if k in stats}
        print(json.dumps({"receiver": figures}, indent=2), flush=True)
        daemon.signal(signal.SIGTERM)
        await viewer.page.wait_for("window.castdViewer.message.length > 0", timeout=5)
        rc, out = await daemon.wait(timeout=5)
        say(f"castd stopped (exit {rc}): {out.strip()}; the viewer says: {await viewer.message()}")
        return 0 if rc == 0 and (stats.get("framesDecoded") or 0) > 0 else 1
    finally:
        if daemon:
            await daemon.kill()
        if browser:
            await browser.close()
        if screen:
            screen.stop()
        if rig:
            rig.stop()
        devstack_down(stack.state_dir)
        say("stopped the stack, the screen and the browser")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=5, help="how long to stream (default 5)")
    p.add_argument("--size", default="1920x1080", help="virtual screen size (default 1920x1080)")
    p.add_argument("--use-display", action="store_true", help="cast $DISPLAY instead of a virtual screen")
    p.add_argument("--wayland", action="store_true", help="cast a headless GNOME Mutter session (the Mutter backend)")
    p.add_argument("--out", default="artifacts/demo", help="where to save the screenshots")
    sys.exit(asyncio.run(main(p.parse_args())))
