"""Frames a real browser decodes from castd at 1080p on the bench's busy screen,
and where the machine's CPU goes meanwhile (issue 15: ≥ 29 fps with Firefox).

One cast on the local stack: an Xvfb screen of 1920×1080 with the bench
painter's busy field (random 8×8 blocks scrolled every frame, 30 draws a
second; `--background text`: a page of text scrolling at 120 px/s instead), a browser on the receiver pages — Firefox ESR (answers VP8: it has no
H.264 for WebRTC) or Chromium told to prefer VP8 (`?codec=vp8`; `--codec h264`
for its default answer) — and `castd --session` casting to it. After the first
frames and `--settle` seconds, over `--seconds`: the browser's decoded frame
rate (getStats framesDecoded), castd's encoded and sent rates and its video
bitrate (its stats lines), and the CPU of each process tree (castd, the browser, the painter,
Xvfb) with the machine's total, as % of one core. A measurement, not a test:
run it on a quiet machine for a meaningful frame rate.

    .venv/bin/python IntegrationTests/castkit/bench/browser_fps.py --browser firefox [--seconds 10] [--codec vp8|h264]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from castkit.bench import proctree
from castkit.castd_proc import chromium_cast
from castkit.castd_stats import next_stats, stats_lines
from castkit.devstack import devstack_down, devstack_up
from castkit.paths import REPO
from castkit.xscreen import XScreen

SIZE = (1920, 1080)


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine spent not idle (all cores), from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return (sum(v[:8]) - idle) / os.sysconf("SC_CLK_TCK")


async def measure(args) -> dict:
    stack = devstack_up()
    try:
        if args.browser == "firefox":
            from castkit.firefox import Firefox
            browser = await Firefox().start()
            codec = None            # Firefox answers VP8 by itself
        else:
            from castkit.chromium import Chromium
            browser = await Chromium().start()
            codec = "vp8" if args.codec == "vp8" else None
        screen = await XScreen(*SIZE).start()
        # The bench painter's busy field replaces the test picture.
        screen.painter.terminate()
        screen.painter.wait(5)
        screen.painter = subprocess.Popen(
            [sys.executable, "-m", "castkit.bench.painter", "--display", screen.display, "--background", args.background,
             "--fps", str(args.painter_fps)],
            cwd=REPO / "Scripts", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = await asyncio.get_running_loop().run_in_executor(None, screen.painter.stdout.readline)
        assert b"drawing on" in line, line
        with tempfile.TemporaryDirectory(prefix="castd-fps-") as home:
            async with chromium_cast(stack, Path(home), browser=browser, codec=codec, screen=screen) as (viewer, daemon):
                await viewer.wait_frames(10, timeout=90)
                await asyncio.sleep(args.settle)
                procs = {"castd": daemon.proc.pid, "browser": browser.proc.pid,
                         "painter": screen.painter.pid, "xvfb": screen.xvfb.pid}
                c0t, c0 = await next_stats(daemon, time.monotonic())
                s0, t0 = await viewer.stats(), time.monotonic()
                cpu0 = {k: proctree.cpu_seconds(p) for k, p in procs.items()}
                m0 = machine_busy_seconds()
                await asyncio.sleep(args.seconds)
                s1, t1 = await viewer.stats(), time.monotonic()
                cpu1 = {k: proctree.cpu_seconds(p) for k, p in procs.items()}
                m1 = machine_busy_seconds()
                c1t, c1 = await next_stats(daemon, c0t + args.seconds - 1)
                span, cspan = t1 - t0, c1t - c0t
                decoded = s1["framesDecoded"] - s0["framesDecoded"]
                cpu = {k: round((cpu1[k] - cpu0[k]) / span * 100, 1) for k in procs}
                return {
                    "browser": args.browser, "background": args.background, "codec": s1.get("codec"), "size": [s1.get("frameWidth"), s1.get("frameHeight")],
                    "seconds": round(span, 1),
                    "browser_decoded_fps": round(decoded / span, 1),
                    "browser_frames_dropped": s1.get("framesDropped", 0) - s0.get("framesDropped", 0),
                    "castd_captured_fps": round((c1["captured"] - c0["captured"]) / cspan, 1),
                    "castd_encoded_fps": round((c1["encoded"] - c0["encoded"]) / cspan, 1),
                    "castd_sent_fps": round((c1["frames_sent"] - c0["frames_sent"]) / cspan, 1),
                    "castd_fps_target": c1.get("fps_target"), "castd_encoder_kbps": c1.get("encoder_kbps"),
                    "castd_sent_kbps": round((c1["kbytes_sent"] - c0["kbytes_sent"]) * 1024 * 8 / cspan / 1000),
                    # Frames castd captured but did not encode: the encode thread still busy
                    # (ring_skipped) or the pacer still holding earlier frames (congestion_skipped).
                    "castd_skipped": {k: c1.get(k, 0) - c0.get(k, 0) for k in ("ring_skipped", "ring_dropped",
                                                                              "congestion_skipped")},
                    "castd_stage_ms_p50_p95_max": {k: c1.get(k) for k in ("capture_ms", "convert_ms", "encode_ms",
                                                                          "capture_to_encoded_ms")},
                    # Capture → a frame's last packet handed to the socket (the pacer's wait included),
                    # "p50/p95/max" of each 5 s stats window in the measurement.
                    "castd_capture_to_last_sent_ms": [s.get("capture_to_last_sent_ms") for t, s in stats_lines(daemon)
                                                      if c0t < t <= c1t],
                    "castd_cpu_ms_per_encoded_frame": round((cpu1["castd"] - cpu0["castd"]) * 1000
                                                            / max(1, (c1["encoded"] - c0["encoded"]) * span / cspan), 1),
                    "browser_cpu_ms_per_decoded_frame": round((cpu1["browser"] - cpu0["browser"]) * 1000 / max(1, decoded), 1),
                    "cpu_percent_of_one_core": cpu,
                    "machine_cpu_percent_of_one_core": round((m1 - m0) / span * 100, 1),
                    "cores": os.cpu_count(), "load_1min": round(os.getloadavg()[0], 1),
                }
    finally:
        devstack_down(stack.state_dir)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--browser", choices=("firefox", "chromium"), default="firefox")
    ap.add_argument("--codec", choices=("vp8", "h264"), default="vp8", help="Chromium only: prefer VP8 or keep its default (H.264)")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--settle", type=float, default=3.0, help="seconds after the first 10 frames before measuring")
    ap.add_argument("--painter-fps", type=int, default=30)
    ap.add_argument("--background", choices=("busy", "text"), default="busy",
                    help="busy: the bench's field of random 8x8 blocks scrolled by (9, 5) a draw; "
                         "text: a page of text scrolling at 120 px/s (a realistic busy screen, a different content)")
    args = ap.parse_args()
    print(json.dumps(asyncio.run(measure(args)), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
