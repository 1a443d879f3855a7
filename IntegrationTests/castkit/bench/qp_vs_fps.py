"""Frame rate or quality for text at a given bitrate: the measurement behind RateLadder.

    .venv/bin/python IntegrationTests/castkit/bench/qp_vs_fps.py [--seconds 8] [--rates 1000,1500,2000,2600]

Renders a page of monospaced text scrolling at 120 px/s (1080p, 30 fps, lossless), then
for each bitrate and frame rate (30, 20, 15, 10) encodes it as castd does (x264 superfast,
zerolatency, Constrained Baseline, CBR with a one-frame VBV buffer, no periodic keyframe)
from the source resampled to that frame rate, and compares every encoded frame with its
source frame (PSNR and SSIM, ffmpeg's filters). At a fixed bitrate fewer frames each get
more bits; the table shows where that buys sharper text (a lower QP) and where it does
not. Needs ffmpeg (Debian's, with libx264 and drawtext). Prints a Markdown table.
"""
from __future__ import annotations

import argparse
import random
import re
import subprocess
import tempfile
from pathlib import Path

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"
WORDS = ("the of and to in is for on with as by at from this that castd frame rate bitrate encoder "
         "packet receiver sender screen cast link queue probe estimate").split()


def ffmpeg(*args: str) -> str:
    r = subprocess.run(["ffmpeg", "-hide_banner", "-nostats", "-y", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"ffmpeg {' '.join(args)}: {r.stderr[-800:]}")
    return r.stderr


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--rates", default="1000,1500,2000,2600", help="kbit/s, comma-separated")
    ap.add_argument("--fps", default="30,20,15,10")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="castd-qpfps-"))
    rng = random.Random(7)
    (work / "text.txt").write_text("\n".join(
        f"{i:4d}  " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))) for i in range(400)))
    src = work / "src.mkv"
    ffmpeg("-f", "lavfi", "-i", f"color=c=white:s=1920x1080:r=30:d={a.seconds}",
           "-vf", f"drawtext=fontfile={FONT}:textfile={work / 'text.txt'}:fontsize=22:fontcolor=black"
                  ":line_spacing=6:x=40:y=40-t*120",
           "-c:v", "libx264", "-qp", "0", "-preset", "ultrafast", "-pix_fmt", "yuv420p", str(src))
    rates = [int(x) for x in a.rates.split(",")]
    fpss = [int(x) for x in a.fps.split(",")]
    print("| kbit/s | " + " | ".join(f"{f} fps PSNR dB (SSIM)" for f in fpss) + " |")
    print("|---|" + "---|" * len(fpss))
    for b in rates:
        cells = []
        for f in fpss:
            enc = work / f"enc_{b}_{f}.mp4"
            ffmpeg("-i", str(src), "-vf", f"fps={f}", "-c:v", "libx264", "-preset", "superfast", "-tune", "zerolatency",
                   "-profile:v", "baseline", "-b:v", f"{b}k", "-maxrate", f"{b}k", "-bufsize", str(b * 1000 // f),
                   "-x264-params", "nal-hrd=cbr:keyint=infinite", str(enc))
            cmp = ffmpeg("-i", str(enc), "-i", str(src), "-lavfi",
                         f"[1:v]fps={f}[r];[0:v]split[a][b];[r]split[c][d];[a][c]psnr;[b][d]ssim", "-f", "null", "-")
            psnr = re.search(r"average:([0-9.]+|inf)", cmp)
            ssim = re.search(r"All:([0-9.]+)", cmp)
            cells.append(f"{float(psnr.group(1)):.1f} ({float(ssim.group(1)):.3f})" if psnr and ssim else "?")
        print(f"| {b} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
