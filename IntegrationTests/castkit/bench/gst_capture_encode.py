"""The capture → convert → encode work of castd done by GStreamer, per frame.

    python IntegrationTests/castkit/bench/gst_capture_encode.py [--frames 150] [--scenario static|busy ...]

Pipeline: ximagesrc (use-damage=false: a full XShm copy per frame, as the
castd capture bench does) ! videoconvert ! I420 BT.709 ! x264enc (castd's
settings, gst.x264) ! fakesink, 1920×1080 at 30 fps on its own Xvfb screen
with the bench painter (static: the block field standing still; busy: the
block field scrolled by (9, 5) px per frame — the content castd's
ConvertEncodeBench encodes).
Pad probes time each frame on the pipeline clock (CLOCK_MONOTONIC):
capture = pushed by ximagesrc − the capture time it stamped (base time + PTS),
convert = out of videoconvert − into it, encode = out of x264enc − into it
(all in the one streaming thread: no queues). CPU (user + sys of this
process, i.e. the GStreamer threads) and peak RSS over the measured frames.
Prints one JSON object per scenario, one per line.
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
import time

from castkit.bench import gst
from castkit.bench.gst import Gst
from castkit.bench.screen import BenchScreen
from castkit.bench.stats import percentiles

WARMUP = 10


def cpu_s() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def run(scenario: str, frames: int, width: int = 1920, height: int = 1080) -> dict:
    # static: ConvertEncodeBench's still block field (what castd encodes in its static run)
    with BenchScreen(width, height, "still" if scenario == "static" else "busy") as screen:
        _, _, kbps = gst.cap(width, height)
        desc = (gst.source(screen.display, width, height, use_damage=False)
                + f" ! {gst.x264(kbps)} ! fakesink name=sink sync=false")
        pipe = Gst.parse_launch(desc.replace("x264enc ", "x264enc name=enc ", 1))
        src = pipe.get_by_name("ximagesrc0") or next(e for e in pipe.iterate_sources())
        conv, enc = pipe.get_by_name("convert"), pipe.get_by_name("enc")
        clock_now = Gst.SystemClock.obtain().get_time
        rows: dict[str, list[float]] = {"capture": [], "convert": [], "encode": []}
        marks: dict[str, float] = {}
        count = {"in": 0, "out": 0, "bytes": 0}
        cpu_mark: list[float] = []
        done = []

        def probe(name):
            def f(pad, info):
                t = clock_now()
                buf = info.get_buffer()
                if name == "src_out":
                    count["in"] += 1
                    if count["in"] > WARMUP and buf.pts != Gst.CLOCK_TIME_NONE:
                        rows["capture"].append((t - (pipe.get_base_time() + buf.pts)) / 1e6)
                elif name in ("conv_in", "enc_in"):
                    marks[name] = t
                elif name == "conv_out" and count["in"] > WARMUP:
                    rows["convert"].append((t - marks["conv_in"]) / 1e6)
                elif name == "enc_out":
                    count["out"] += 1
                    if count["out"] == WARMUP:
                        cpu_mark.append(cpu_s())
                        cpu_mark.append(time.monotonic())
                    if count["out"] > WARMUP:
                        rows["encode"].append((t - marks["enc_in"]) / 1e6)
                        count["bytes"] += buf.get_size()
                    if count["out"] == WARMUP + frames and not done:
                        done.append((cpu_s(), time.monotonic()))
                return Gst.PadProbeReturn.OK
            return f

        src.get_static_pad("src").add_probe(Gst.PadProbeType.BUFFER, probe("src_out"))
        conv.get_static_pad("sink").add_probe(Gst.PadProbeType.BUFFER, probe("conv_in"))
        conv.get_static_pad("src").add_probe(Gst.PadProbeType.BUFFER, probe("conv_out"))
        enc.get_static_pad("sink").add_probe(Gst.PadProbeType.BUFFER, probe("enc_in"))
        enc.get_static_pad("src").add_probe(Gst.PadProbeType.BUFFER, probe("enc_out"))
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        pipe.set_state(Gst.State.PLAYING)
        bus = pipe.get_bus()
        deadline = time.monotonic() + (WARMUP + frames) / gst.FPS * 3 + 20
        error = None
        while not done and time.monotonic() < deadline:
            msg = bus.timed_pop_filtered(100 * Gst.MSECOND, Gst.MessageType.ERROR)
            if msg:
                error = msg.parse_error()[0].message
                break
        pipe.set_state(Gst.State.NULL)
        if not done:
            raise RuntimeError(f"gstreamer {scenario}: {error or 'timed out'} after {count['out']} frames")
        (cpu1, t1), cpu0, t0 = done[0], cpu_mark[0], cpu_mark[1]
        n = len(rows["encode"][:frames])
        totals = [a + b + c for a, b, c in zip(rows["capture"], rows["convert"], rows["encode"])]
        return {
            "bench": "gstreamer-capture-convert-encode", "size": f"{width}x{height}", "scenario": scenario,
            "frames": n, "preset": gst.PRESET, "pipeline": desc,
            "capture_ms": percentiles(rows["capture"][:frames]), "convert_ms": percentiles(rows["convert"][:frames]),
            "encode_ms": percentiles(rows["encode"][:frames]), "total_ms": percentiles(totals[:frames]),
            "bitrate_bps": int(count["bytes"] * 8 * gst.FPS / max(1, n)),
            "cpu_percent_of_one_core": round((cpu1 - cpu0) / (t1 - t0) * 100, 1),
            "cpu_ms_per_frame": round((cpu1 - cpu0) / max(1, n) * 1000, 2),
            "max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "rss_before_pipeline_mib": round(rss_before, 1),
        }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=150)
    ap.add_argument("--scenario", action="append", choices=["static", "busy"])
    args = ap.parse_args()
    for s in args.scenario or ["static", "busy"]:
        print(json.dumps(run(s, args.frames), sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
