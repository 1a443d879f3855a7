"""x264's settings for screen content, chosen by measurement (issue 32, "screen-content encoding").

    .venv/bin/python -m castkit.bench.x264_tuning [--content text|slides|video]... [--kbps N]...
        [--variant NAME]... [--seconds S] [--fps F]... [--out DIR]

Encodes the quality bench's contents (content.py: the exact pictures the painter draws, the
timecode included) with libx264 as castd sets it up (X264Encoder: the preset, tune
zerolatency, Constrained Baseline, two slice threads, CBR with a one-frame VBV, no scene-cut
IDRs, minimum QP 12), once per variant of the settings that matter for screen content, and
compares each decoded frame with its source: PSNR-Y and SSIM-Y (ffmpeg's psnr and ssim filters,
on limited-range codes; the ranking, not the absolute figure, is what this is for), bits
actually spent, and the encoder's CPU time per frame (user + system of the ffmpeg process, the
same libx264 castd links). Source frames: RGB from content.render converted to yuv420p BT.709
limited range by ffmpeg (castd's conversion), cached per content and frame rate.

Prints a table and writes x264-tuning.json. A measuring tool: nothing here passes or fails.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from castkit.bench import content as contents
from castkit.paths import REPO

W, H = 1920, 1080
START_US = 42_000_000      # the contents' time at the first frame: slides change 3 s in (at 45 s)
SKIP_S = 2.0               # the first seconds (the first IDR under a one-frame VBV, and its climb) not counted

# name → (preset, extra x264 params): castd's settings are "castd"; each other variant changes one thing
VARIANTS = {
    "castd": ("superfast", ""),
    "aq-off": ("superfast", "aq-mode=0"),
    "aq-0.5": ("superfast", "aq-strength=0.5"),
    "aq-auto": ("superfast", "aq-mode=2"),
    "deblock-1": ("superfast", "deblock=-1,-1"),
    "deblock-2": ("superfast", "deblock=-2,-2"),
    "no-deblock": ("superfast", "no-deblock=1"),
    "subme-4": ("superfast", "subme=4"),
    "me-hex": ("superfast", "me=hex"),
    "veryfast": ("veryfast", ""),
    "faster": ("faster", ""),
    # pairs, after the single changes
    "no-deblock+aq-0.5": ("superfast", "no-deblock=1:aq-strength=0.5"),
    "no-deblock+veryfast": ("veryfast", "no-deblock=1"),
}


def castd_params(kbps: int, fps: int, extra: str) -> str:
    """X264Encoder's settings, as x264 parameters (ffmpeg's -x264-params)."""
    base = (f"bitrate={kbps}:vbv-maxrate={kbps}:vbv-bufsize={max(1, kbps // fps)}:qpmin=12:keyint=infinite:"
            f"min-keyint=1:scenecut=0:bframes=0:rc-lookahead=0:sync-lookahead=0:sliced-threads=1:threads=2:slices=2:"
            f"colorprim=bt709:transfer=bt709:colormatrix=bt709:repeat-headers=1")
    return base + (":" + extra if extra else "")


def source(name: str, seconds: float, fps: int, cache: Path, matrix: str = "bt709") -> Path:
    """The content's frames as raw yuv420p (limited range, in `matrix`: castd's BT.709 for H.264,
    BT.601 for VP8), made once."""
    f = cache / f"{name}-{W}x{H}-{fps}fps-{seconds:g}s{'' if matrix == 'bt709' else '-' + matrix}.yuv"
    if f.exists():
        return f
    c = contents.Content(name, W, H)
    n = int(seconds * fps)
    tmp = f.with_suffix(".part")
    p = subprocess.Popen(["ffmpeg", "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "bgr0", "-s", f"{W}x{H}",
                          "-r", str(fps), "-i", "-", "-vf", f"scale=out_color_matrix={matrix}:out_range=tv",
                          "-pix_fmt", "yuv420p", "-f", "rawvideo", str(tmp)], stdin=subprocess.PIPE)
    for i in range(n):
        v = (START_US + i * 1_000_000 // fps) % 2**32
        p.stdin.write(contents.render(c, v, i).tobytes())    # 0x00RRGGBB little-endian: B G R 0
    p.stdin.close()
    if p.wait() != 0:
        raise RuntimeError(f"ffmpeg could not convert the {name} frames")
    tmp.rename(f)
    return f


def encode(src: Path, out: Path, kbps: int, fps: int, preset: str, extra: str) -> dict:
    """One encode; the CPU seconds of the ffmpeg process (libx264's work, and reading raw frames)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "yuv420p", "-s", f"{W}x{H}",
                    "-r", str(fps), "-i", str(src), "-c:v", "libx264", "-preset", preset, "-tune", "zerolatency",
                    "-profile:v", "baseline", "-x264-params", castd_params(kbps, fps, extra), "-f", "h264", str(out)],
                   check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu_s": round(cpu, 3), "wall_s": round(time.monotonic() - t0, 3), "bytes": out.stat().st_size}


def compare(src: Path, enc: Path, fps: int, skip: int, fmt: str = "h264") -> dict:
    """PSNR-Y per frame (mean and 5th percentile) and SSIM-Y mean, decoded against the source,
    and the bits spent, over the frames after the first `skip`. `fmt` "h264": a raw stream, a
    picture per source frame; "ivf": a frame the encoder dropped is missing from the file, so
    the decoded pictures are set on the source's frame clock by their timestamps (the one
    before a gap shown again, as a receiver would)."""
    ssim_log = enc.with_suffix(".ssim.log")
    decoded = ["-r", str(fps), "-i", str(enc)] if fmt == "h264" else ["-i", str(enc)]
    on_clock = "" if fmt == "h264" else f"fps={fps}:start_time=0,"
    with tempfile.NamedTemporaryFile(suffix=".log") as stats:
        r = subprocess.run(["ffmpeg", "-v", "info", *decoded, "-f", "rawvideo", "-pix_fmt", "yuv420p",
                            "-s", f"{W}x{H}", "-r", str(fps), "-i", str(src), "-lavfi",
                            f"[0:v]{on_clock}split[a][b];[1:v]split[c][d];[a][c]psnr=stats_file={stats.name};"
                            f"[b][d]ssim=stats_file={ssim_log}",
                            "-f", "null", "-"], capture_output=True, text=True, check=True)
        ys = [float(m.group(1)) for m in re.finditer(r"psnr_y:(\S+)", Path(stats.name).read_text())][skip:]
    ss = [float(m.group(1)) for m in re.finditer(r"Y:([\d.]+)", ssim_log.read_text())][skip:]
    sizes = [int(x) for x in subprocess.run(["ffprobe", "-v", "error", "-show_entries", "packet=size", "-of", "csv=p=0",
                                             "-f", fmt, str(enc)], capture_output=True, text=True,
                                            check=True).stdout.split()][skip:]
    ys = [min(y, 100.0) for y in ys]
    ys_sorted = sorted(ys)
    return {"frames": len(ys), "psnr_y_mean": round(sum(ys) / len(ys), 2) if ys else None,
            "psnr_y_p5": round(ys_sorted[int(0.05 * (len(ys) - 1))], 2) if ys else None,
            "ssim_y": round(sum(ss) / len(ss), 5) if ss else None,
            "mbps": round(sum(sizes) * 8 * fps / max(1, len(sizes)) / 1e6, 3)}


def sweep(a: argparse.Namespace, cache: Path, variants, matrix: str, fmt: str, encode_one) -> list[dict]:
    """Every content × frame rate × kbit/s × variant of `a` (sweep_arguments): `encode_one(src, enc,
    kbps, fps, variant)` encodes the clip into `enc` (a `fmt` file: h264 or ivf) and returns the
    row's encoder fields; each is compared with its source here and printed as it comes."""
    rows = []
    for name in a.content or ["text", "slides", "video"]:
        for fps in a.fps or [30]:
            src = source(name, a.seconds, fps, cache, matrix)
            for kbps in a.kbps or [1000, 2000, 4000]:
                for variant in a.variant or list(variants):
                    enc = cache / f"{name}-{fps}-{kbps}-{variant}.{fmt}"
                    e = encode_one(src, enc, kbps, fps, variant)
                    row = {"content": name, "fps": fps, "kbps": kbps, "variant": variant, **e,
                           **compare(src, enc, fps, int(a.skip * fps), fmt)}
                    rows.append(row)
                    dropped = f", {row['dropped']} dropped" if "dropped" in row else ""
                    print(f"{name:6} {fps:2} fps {kbps:5} kbit/s {variant:11} PSNR-Y {row['psnr_y_mean']:6} "
                          f"(p5 {row['psnr_y_p5']:6}) SSIM-Y {row['ssim_y']} {row['mbps']} Mbit/s "
                          f"{row['cpu_ms_per_frame']} ms/frame{dropped}", file=sys.stderr, flush=True)
                    enc.unlink()
                    enc.with_suffix(".ssim.log").unlink(missing_ok=True)
    return rows


def sweep_arguments(prog: str, doc: str, variants) -> argparse.ArgumentParser:
    """The options a sweep of encoder settings takes (this module's and vp8_tuning's)."""
    ap = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--content", action="append", choices=["text", "slides", "video"])
    ap.add_argument("--kbps", action="append", type=int, help="CBR targets (default 1000, 2000, 4000)")
    ap.add_argument("--fps", action="append", type=int, help="frame rates (default 30)")
    ap.add_argument("--variant", action="append", choices=list(variants))
    ap.add_argument("--seconds", type=float, default=8.0, help="length of each clip (default 8)")
    ap.add_argument("--skip", type=float, default=SKIP_S, help="seconds at the start not counted (default 2)")
    ap.add_argument("--out", default=str(REPO / "artifacts" / "bench"))
    return ap


def main() -> int:
    a = sweep_arguments("python -m castkit.bench.x264_tuning", __doc__, VARIANTS).parse_args()
    out = Path(a.out)
    cache = out / "x264-tuning-frames"
    cache.mkdir(parents=True, exist_ok=True)
    def one(src: Path, enc: Path, kbps: int, fps: int, variant: str) -> dict:
        preset, extra = VARIANTS[variant]
        e = encode(src, enc, kbps, fps, preset, extra)
        return {"preset": preset, "params": extra, "cpu_ms_per_frame": round(e["cpu_s"] * 1000 / int(a.seconds * fps), 2)}
    rows = sweep(a, cache, VARIANTS, "bt709", "h264", one)
    (out / "x264-tuning.json").write_text(json.dumps({"rows": rows, "seconds": a.seconds,
                                                       "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
                                                      indent=1))
    print("| content | fps | kbit/s | variant | PSNR-Y mean | PSNR-Y p5 | SSIM-Y | Mbit/s | CPU ms/frame |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['content']} | {r['fps']} | {r['kbps']} | {r['variant']} | {r['psnr_y_mean']} | {r['psnr_y_p5']} "
              f"| {r['ssim_y']} | {r['mbps']} | {r['cpu_ms_per_frame']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
