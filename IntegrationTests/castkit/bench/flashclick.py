"""The lip-sync stimulus (issue 18): every PERIOD seconds, on one CLOCK_MONOTONIC schedule,
the X screen's root window turns white (for 200 ms, black otherwise) and a click (a 20 ms
2 kHz burst) starts in the default PipeWire sink at the same instant.

    python IntegrationTests/castkit/bench/flashclick.py --display :50 [--period 2] [--count 12]

The audio goes through ONE GStreamer stream kept open for the whole run (appsrc →
pipewiresink, sync=true, on GStreamer's system clock, which is CLOCK_MONOTONIC: the clock
of the flash schedule), fed with continuous silence in 10 ms buffers whose timestamps put
the click's first sample exactly at each flash's due time; the sink hands each buffer to
PipeWire when its time comes, so queueing before it does not shift the click. (pw-cat fed
through a pipe, the first try, drifted by 100 to 300 ms over a run.) With --calibrate the
driver also records the sink's monitor (`pw-cat --record`) and prints, per click, when its
onset was read back minus when it was due: what PipeWire and a recorder add together, an
upper bound on what the player adds after its sink (castd's own capture is a recorder too).

Prints one JSON line per event on stdout ({"type":"flash","n":…,"due":…}; with --calibrate
also {"type":"loopback","n":…,"seconds":…}), "ready" first; stops after --count events.
Runs with the environment of the PipeWire to play into (audio_rig.PipeWireAudioRig.env()).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time

import numpy as np
from Xlib import display as xdisplay

from castkit.bench.gst import Gst

RATE = 48_000
CHUNK = 480                      # 10 ms of stereo s16 per write
CLICK_S, CLICK_HZ, CLICK_AMP = 0.020, 2000.0, 0.8
FLASH_S = 0.200
AHEAD_S = 0.05                   # audio handed to GStreamer this long before it is due


def click() -> np.ndarray:
    t = np.arange(int(CLICK_S * RATE)) / RATE
    return np.round(CLICK_AMP * 32767 * np.sin(2 * np.pi * CLICK_HZ * t)).astype("<i2")


def say(obj: dict) -> None:
    print(json.dumps(obj), flush=True)


def record_loopback(start: float, period: float, count: int, out: list) -> None:
    """Reads the sink's monitor; for each click, when its onset sample was read minus its due time."""
    rec = subprocess.Popen(["pw-cat", "--record", "--latency", "10ms", "--rate", str(RATE), "--channels", "2",
                            "--format", "s16", "-P", "{ stream.capture.sink=true }", "-"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out.append(rec)
    header = rec.stdout.read(44)          # pw-cat writes a WAV header first
    if len(header) < 44:
        return
    quiet = 0
    n = 0
    while n < count:
        data = rec.stdout.read1(CHUNK * 4) if hasattr(rec.stdout, "read1") else rec.stdout.read(CHUNK * 4)
        now = time.monotonic()
        if not data:
            return
        x = np.frombuffer(data[: len(data) // 4 * 4], dtype="<i2").reshape(-1, 2)[:, 0]
        loud = np.flatnonzero(np.abs(x) > 3000)
        if loud.size and quiet >= RATE // 2:
            # The onset was read `len - index` samples before the end of this read.
            onset = now - (len(x) - loud[0]) / RATE
            k = round((onset - start) / period)
            say({"type": "loopback", "n": k, "seconds": round(onset - (start + k * period), 4)})
            n += 1
        quiet = 0 if loud.size else quiet + len(x)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--display", required=True)
    ap.add_argument("--period", type=float, default=2.0)
    ap.add_argument("--count", type=int, default=12)
    ap.add_argument("--lead-in", type=float, default=3.0, help="seconds of black and silence before the first flash")
    ap.add_argument("--calibrate", action="store_true")
    args = ap.parse_args()

    d = xdisplay.Display(args.display)
    root = d.screen().root
    w, h = d.screen().width_in_pixels, d.screen().height_in_pixels
    white, black = root.create_gc(foreground=0xFFFFFF), root.create_gc(foreground=0x000000)
    root.fill_rectangle(black, 0, 0, w, h)
    d.sync()

    # The player: GStreamer's appsrc → pipewiresink with sync=true on the system clock
    # (CLOCK_MONOTONIC, the clock time.monotonic() reads): a buffer with pts P leaves for
    # PipeWire at base time + P, so the click's onset is due at a known monotonic instant
    # whatever the buffering in between (pw-cat fed from a pipe drifted by 100–300 ms).
    pipeline = Gst.parse_launch(
        "appsrc name=src is-live=true format=time "
        f"caps=audio/x-raw,format=S16LE,rate={RATE},channels=2,layout=interleaved "
        "! pipewiresink name=sink sync=true")
    clock = Gst.SystemClock.obtain()
    pipeline.use_clock(clock)
    pipeline.set_start_time(Gst.CLOCK_TIME_NONE)
    base = time.monotonic() + 0.3
    pipeline.set_base_time(int(base * 1e9))
    pipeline.set_state(Gst.State.PLAYING)
    src = pipeline.get_by_name("src")
    burst = click()
    silence = np.zeros(CHUNK, dtype="<i2")

    start = base + args.lead_in                      # the first flash's (and click's) due time
    first_click_sample = round(args.lead_in * RATE)
    period_samples = round(args.period * RATE)
    recorders: list = []
    if args.calibrate:
        threading.Thread(target=record_loopback, args=(start, args.period, args.count, recorders), daemon=True).start()
    say({"type": "ready", "width": w, "height": h})

    k = 0
    flashed, lit_until = 0, None
    end_sample = first_click_sample + args.count * period_samples + RATE // 2
    while k * CHUNK < end_sample:
        push_at = base + k * CHUNK / RATE - AHEAD_S
        flash_at = start + flashed * args.period if flashed < args.count else float("inf")
        wake = min(push_at, flash_at, lit_until or float("inf"))
        delay = wake - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        now = time.monotonic()
        if now >= flash_at:
            root.fill_rectangle(white, 0, 0, w, h)
            d.sync()
            say({"type": "flash", "n": flashed, "due": flash_at, "at": time.monotonic(),
                 "due_unix": flash_at + (time.time() - time.monotonic())})
            lit_until = flash_at + FLASH_S
            flashed += 1
        if lit_until is not None and now >= lit_until:
            root.fill_rectangle(black, 0, 0, w, h)
            d.sync()
            lit_until = None
        if now < push_at:
            continue
        chunk = silence.copy()
        lo = k * CHUNK
        for j in {(lo - first_click_sample) // period_samples, (lo + CHUNK - 1 - first_click_sample) // period_samples}:
            if not 0 <= j < args.count:
                continue
            onset = first_click_sample + j * period_samples
            a, b = max(onset, lo), min(onset + len(burst), lo + CHUNK)
            if a < b:
                chunk[a - lo:b - lo] = burst[a - onset:b - onset]
        buf = Gst.Buffer.new_wrapped(np.repeat(chunk[:, None], 2, axis=1).tobytes())
        buf.pts, buf.duration = lo * 1_000_000_000 // RATE, CHUNK * 1_000_000_000 // RATE
        src.emit("push-buffer", buf)
        k += 1
    time.sleep(AHEAD_S + 0.1)
    pipeline.set_state(Gst.State.NULL)
    for r in recorders:
        r.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
