"""libvpx's VP8 settings for screen content, chosen by measurement (issue 32, "screen-content
encoding", "the same for libvpx").

    .venv/bin/python -m castkit.bench.vp8_tuning [--content text|slides|video]... [--kbps N]...
        [--variant NAME]... [--seconds S] [--fps F]... [--out DIR] [--summarize JSON]

The VP8 twin of x264_tuning: the same contents, clips and comparison (x264_tuning.source and
.compare), encoded by libvpx set up as castd's VP8Encoder sets it up (real-time deadline, CBR,
libwebrtc's small buffer, one thread, error resilient, no key frames but the first, the Tuning
defaults), once per variant of the knobs that matter for screen content. ffmpeg's libvpx
wrapper has no screen-content mode, so the encoder is vp8probe.c (compiled here against the
same libvpx castd links), fed the clip's raw frames and writing IVF. Source frames are BT.601
limited range, castd's conversion for VP8. CPU: the encoder's own per-frame CPU time inside
the probe. A frame the encoder drops is shown again in its place, as a receiver would.

Prints a table and writes vp8-tuning.json. A measuring tool: nothing here passes or fails.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

from castkit.bench import x264_tuning as shared

PROBE_C = Path(__file__).with_name("vp8probe.c")

# name → the probe's settings that differ from "castd", VP8Encoder.Tuning's above 15 fps (at 15 fps
# and below castd now runs cpu-used −6, the speed-6 variant, which this sweep chose); each other
# variant changes one thing
CASTD = {"SPEED": "-10", "SCM": "1", "STATIC": "1", "SHARP": "0", "ER": "1", "MAXINTRA": "300",
         "UNDER": "100", "OVER": "15", "BUFI": "500", "BUFO": "600", "BUF": "1000", "MINQ": "2", "MAXQ": "63"}
VARIANTS = {
    "castd": {},
    "scm-0": {"SCM": "0"},
    "scm-2": {"SCM": "2"},
    "speed-6": {"SPEED": "-6"},
    "speed-8": {"SPEED": "-8"},
    "speed-12": {"SPEED": "-12"},
    "sharp-3": {"SHARP": "3"},
    "sharp-7": {"SHARP": "7"},
    "static-0": {"STATIC": "0"},
    "static-100": {"STATIC": "100"},
    "er-off": {"ER": "0"},
    "minq-4": {"MINQ": "4"},
}


def probe(cache: Path) -> Path:
    exe = cache / "vp8probe"
    if not exe.exists() or exe.stat().st_mtime < PROBE_C.stat().st_mtime:
        subprocess.run(["cc", "-O2", "-o", str(exe), str(PROBE_C), "-lvpx", "-lx264", "-lm"], check=True)
    return exe


def encode(exe: Path, src: Path, out: Path, kbps: int, fps: int, variant: dict) -> dict:
    env = {**CASTD, **variant, "IN": str(src), "OUT": str(out), "FPS": str(fps), "KBPS": str(kbps),
           "W": str(shared.W), "H": str(shared.H), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([str(exe), "vp8"], env=env, capture_output=True, text=True, check=True)
    m = dict(re.findall(r"(\w+)=([-\d.]+)", r.stdout))
    return {"cpu_ms_per_frame": float(m["cpu_ms"]), "dropped": int(m["dropped"]), "q_mean": float(m["q"])}


def against_castd(rows: list[dict]) -> list[dict]:
    """Each variant against castd's settings over the cells (content × fps × kbit/s) both ran:
    PSNR-Y mean difference (min / mean / max, dB), in how many cells its SSIM-Y is higher, and
    the mean ratios of the bits spent and the encoder's CPU."""
    base = {(r["content"], r["fps"], r["kbps"]): r for r in rows if r["variant"] == "castd"}
    out = []
    for v in dict.fromkeys(r["variant"] for r in rows if r["variant"] != "castd"):
        pairs = [(r, base[k]) for r in rows if r["variant"] == v
                 and (k := (r["content"], r["fps"], r["kbps"])) in base]
        if not pairs:
            continue
        d = [r["psnr_y_mean"] - b["psnr_y_mean"] for r, b in pairs]
        out.append({"variant": v, "cells": len(pairs), "psnr_diff_min": round(min(d), 2),
                    "psnr_diff_mean": round(sum(d) / len(d), 2), "psnr_diff_max": round(max(d), 2),
                    "ssim_higher": sum(1 for r, b in pairs if r["ssim_y"] > b["ssim_y"]),
                    "mbps_ratio": round(sum(r["mbps"] / b["mbps"] for r, b in pairs) / len(pairs), 2),
                    "cpu_ratio": round(sum(r["cpu_ms_per_frame"] / b["cpu_ms_per_frame"] for r, b in pairs) / len(pairs), 2),
                    "dropped": sum(r["dropped"] for r, _ in pairs)})
    return out


def print_tables(rows: list[dict]) -> None:
    print("| content | fps | kbit/s | variant | PSNR-Y mean | PSNR-Y p5 | SSIM-Y | Mbit/s | CPU ms/frame | dropped |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['content']} | {r['fps']} | {r['kbps']} | {r['variant']} | {r['psnr_y_mean']} | {r['psnr_y_p5']} "
              f"| {r['ssim_y']} | {r['mbps']} | {r['cpu_ms_per_frame']} | {r['dropped']} |")
    print()
    print("| variant | PSNR-Y mean against castd's (min / mean / max, dB) | SSIM-Y higher in | Mbit/s spent, ratio "
          "| encode CPU, ratio | frames dropped |")
    print("|---|---|---:|---:|---:|---:|")
    for v in against_castd(rows):
        print(f"| {v['variant']} | {v['psnr_diff_min']:+} / {v['psnr_diff_mean']:+} / {v['psnr_diff_max']:+} "
              f"| {v['ssim_higher']} of {v['cells']} | {v['mbps_ratio']} | {v['cpu_ratio']} | {v['dropped']} |")


def main() -> int:
    ap = shared.sweep_arguments("python -m castkit.bench.vp8_tuning", __doc__, VARIANTS)
    ap.add_argument("--summarize", metavar="JSON", help="print the tables of an earlier run's vp8-tuning.json, encode nothing")
    a = ap.parse_args()
    if a.summarize:
        print_tables(json.loads(Path(a.summarize).read_text())["rows"])
        return 0
    out = Path(a.out)
    cache = out / "x264-tuning-frames"
    cache.mkdir(parents=True, exist_ok=True)
    exe = probe(cache)
    rows = shared.sweep(a, cache, VARIANTS, "bt601", "ivf",
                        lambda src, enc, kbps, fps, variant: {"settings": VARIANTS[variant],
                                                              **encode(exe, src, enc, kbps, fps, VARIANTS[variant])})
    (out / "vp8-tuning.json").write_text(json.dumps({"rows": rows, "seconds": a.seconds, "castd": CASTD,
                                                     "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
                                                    indent=1))
    print_tables(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
