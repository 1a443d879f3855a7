"""A person's whole meeting (issue 32): a long 1080p cast through a real tbf bottleneck whose
capacity changes every two minutes, on the stack with 60 s access tokens, to Chromium's
receiver page. Sampled every 10 s: castd's resident memory, open descriptors, CPU time and
frames sent. Judged: castd alive, its Realtime socket never interrupted, no auth error, memory and
descriptors flat (slope per hour), CPU per frame flat, no picture gap over 1 s, and the last
ten minutes' picture (decoder QP, fps) as the first ten's.

The capacity cycle (8, 4, 2, 1.5, 3 Mbit/s, two minutes each) lasts ten minutes, so the first
and the last ten minutes of a run whose length is a multiple of ten see the same links.
`Scripts/faults --only meeting --meeting-minutes 120` runs the two-hour meeting."""
from __future__ import annotations

import asyncio
import json
import re
import statistics
import time
from pathlib import Path

from castkit.faults.bottleneck import _tbf
from castkit.faults.world import TOKEN_STACK, Result, World, casting, check, process_sample

CYCLE_KBIT = (8000, 4000, 2000, 1500, 3000)
SEGMENT_S = 120
WINDOW_S = 600                # the first and the last ten minutes
WARM_UP_S = 300               # memory and descriptors are judged after this
SAMPLE_S = 10
MAX_GAP_S = 1.0


def _per_hour(points: list[tuple[float, float]]) -> float:
    ts, vs = [p[0] for p in points], [p[1] for p in points]
    return statistics.linear_regression(ts, vs).slope * 3600 if len(points) >= 3 else 0.0


def _window(a: dict, b: dict, frames: list[float], t0: float, t1: float) -> dict:
    """What the viewer got between two getStats snapshots a and b (taken at t0 and t1)."""
    dec = (b.get("framesDecoded") or 0) - (a.get("framesDecoded") or 0)
    qp = (b.get("qpSum") or 0) - (a.get("qpSum") or 0) if b.get("qpSum") is not None else None
    fr = [t for t in frames if t0 <= t <= t1]
    return {"fps": round(len(fr) / (t1 - t0), 2), "decoder_qp_mean": round(qp / dec, 2) if dec and qp is not None else None,
            "frame_size": f"{b.get('frameWidth')}x{b.get('frameHeight')}"}


async def meeting(w: World) -> Result:
    minutes = w.a.meeting_minutes
    total_s = minutes * 60
    window = min(WINDOW_S, total_s / 3)
    r = Result(f"meeting {minutes:g} min", "1080p video-over-text through tbf changing every 2 min (8/4/2/1.5/3 Mbit/s), "
                                           "60 s access tokens: alive, Realtime never interrupted, no auth error, RSS and fds flat, "
                                           "CPU per frame flat, no gap over 1 s, last 10 min's QP and fps as the first's "
                                           "(issue 32)")
    from castkit.bench.screen import BenchScreen
    with BenchScreen(1920, 1080, "static", fps=30, content="video") as screen:
        async with casting(w, r.name, stack=TOKEN_STACK.get(w), chromium=True, display=screen.display) as c:
            pid = c.daemon.proc.pid
            samples: list[tuple[float, int, int, float]] = []
            snaps: dict[str, tuple[float, dict]] = {}
            t0 = time.monotonic()
            segment = -1
            try:
                while (now := time.monotonic()) - t0 < total_s and c.daemon.proc.returncode is None:
                    el = now - t0
                    if int(el // SEGMENT_S) != segment:
                        segment = int(el // SEGMENT_S)
                        _tbf(w, CYCLE_KBIT[segment % len(CYCLE_KBIT)], change=segment > 0)
                    for key, at in (("start", 0), ("first_end", window), ("last_start", total_s - window)):
                        if key not in snaps and el >= at:
                            snaps[key] = (now, (await c.report())["stats"] or {})
                    samples.append((round(el, 1), *process_sample(pid)))
                    await asyncio.sleep(SAMPLE_S)
                t_end = time.monotonic()
                rep = await c.report()
                snaps["end"] = (t_end, rep["stats"] or {})
            finally:
                _tbf(w, None)
            alive = c.daemon.proc.returncode is None
            lines, times = list(c.daemon.stderr_lines), list(c.daemon.stderr_times)
    (c.dir / "samples.json").write_text(json.dumps({"samples": samples, "snapshots": snaps}, default=str))
    if len(samples) < 6 or len(snaps) < 4:
        return check(r, False, f"castd {'casting' if alive else 'EXITED'} after {len(samples)} samples", samples=len(samples))

    warm = [s for s in samples if s[0] >= min(WARM_UP_S, total_s * 0.2)]
    rss_slope = _per_hour([(s[0], s[1]) for s in warm])                     # KiB per hour
    fd_slope = _per_hour([(s[0], s[2]) for s in warm])
    rss_mean = statistics.mean(s[1] for s in warm)

    def cpu_per_frame(t_a: float, t_b: float) -> float | None:
        cpu = [s for s in samples if t_a - t0 <= s[0] <= t_b - t0]
        sent = c.frames_sent(t_a, t_b)
        return round((cpu[-1][3] - cpu[0][3]) / sent[1] * 1000, 3) if len(cpu) >= 2 and sent and sent[1] else None

    frames = rep["frames"]
    fr = [t for t in frames if t0 + 5 <= t <= t_end]
    gaps = [b - a for a, b in zip(fr, fr[1:])]
    first = _window(snaps["start"][1], snaps["first_end"][1], frames, snaps["start"][0], snaps["first_end"][0])
    last = _window(snaps["last_start"][1], snaps["end"][1], frames, snaps["last_start"][0], snaps["end"][0])
    first["cpu_ms_per_frame"] = cpu_per_frame(snaps["start"][0], snaps["first_end"][0])
    last["cpu_ms_per_frame"] = cpu_per_frame(snaps["last_start"][0], snaps["end"][0])
    # castd logs no line per refresh; the token stack's gateway logs each one it served.
    gw = Path(TOKEN_STACK.get(w).state_dir) / "gateway.log"
    served = gw.read_text(errors="replace").splitlines() if gw.exists() else []
    refreshes = sum(1 for l in served if "path=/auth/v1/token status=200" in l)
    # The receiver page's CORS preflights (OPTIONS, 204) are not refusals.
    refused = sum(1 for l in served if "path=/auth/v1/token status=" in l and "status=200" not in l
                  and "method=OPTIONS" not in l)
    # The Chromium receiver page inserts no rows of its own, so signaling is judged from castd's
    # side: its Realtime socket never interrupted before the end (the shutdown's 'left' comes after).
    interrupted = [l for t, l in zip(times, lines) if t <= t_end and "event=realtime_interrupted" in l]
    unauthorized = [l for l in lines if re.search(r"\b(status|code)=\"?(401|unauthori[sz]ed)\b|unauthori[sz]ed|invalid.?jwt|"
                                                  r"token.{0,20}expired", l, re.I)]
    figs = {"minutes": minutes, "samples": len(samples), "rss_start_mib": round(warm[0][1] / 1024, 1),
            "rss_end_mib": round(warm[-1][1] / 1024, 1), "rss_slope_mib_per_h": round(rss_slope / 1024, 2),
            "fds_start": warm[0][2], "fds_end": warm[-1][2], "fds_max": max(s[2] for s in warm),
            "fd_slope_per_h": round(fd_slope, 2), "max_gap_s": round(max(gaps, default=0), 2),
            "gaps_over_1s": sum(1 for g in gaps if g > MAX_GAP_S), "first_10min": first, "last_10min": last,
            "token_refreshes": refreshes, "token_refreshes_refused": refused, "auth_errors": unauthorized[:5],
            "realtime_interruptions": len(interrupted)}
    cpu_ok = (first["cpu_ms_per_frame"] and last["cpu_ms_per_frame"]
              and last["cpu_ms_per_frame"] <= first["cpu_ms_per_frame"] * 1.15)
    qp_ok = (first["decoder_qp_mean"] is not None and last["decoder_qp_mean"] is not None
             and last["decoder_qp_mean"] <= first["decoder_qp_mean"] + 2)
    fps_ok = last["fps"] >= 0.9 * first["fps"]
    mem_ok = rss_slope < min(0.02 * rss_mean, 4096) and figs["fds_max"] - figs["fds_start"] <= 2
    ok = (alive and not interrupted and refreshes > 0 and not unauthorized and mem_ok and cpu_ok and qp_ok and fps_ok
          and figs["gaps_over_1s"] == 0)
    return check(r, ok, f"castd {'casting' if alive else 'EXITED'} after {minutes:g} min; RSS {figs['rss_start_mib']} → "
                        f"{figs['rss_end_mib']} MiB ({figs['rss_slope_mib_per_h']:+} MiB/h), fds {figs['fds_start']} → "
                        f"{figs['fds_end']} ({figs['fd_slope_per_h']:+}/h); CPU/frame {first['cpu_ms_per_frame']} → "
                        f"{last['cpu_ms_per_frame']} ms; first/last 10 min: {first['fps']}/{last['fps']} fps, QP "
                        f"{first['decoder_qp_mean']}/{last['decoder_qp_mean']}; longest gap {figs['max_gap_s']} s "
                        f"({figs['gaps_over_1s']} over 1 s); {refreshes} token refreshes, {len(unauthorized)} auth errors, "
                        f"{len(interrupted)} Realtime interruptions", **figs)
