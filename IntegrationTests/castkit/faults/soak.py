"""The soak row: a long cast with some loss, castd's memory and file descriptors sampled every
10 s (issue 8 §8)."""
from __future__ import annotations

import asyncio
import json
import statistics
import time

from castkit.faults.world import LOSSY, Result, World, casting, check, frame_figures, process_sample


async def soak(w: World) -> Result:
    minutes = w.a.soak_minutes
    r = Result(f"soak {minutes:g} min", "memory sampled every 10 s: no growth trend after warm-up; no leaked file "
                                        "descriptors (issue 8 §8)")
    async with casting(w, r.name) as c:
        w.impair(**LOSSY, loss=0.01)                  # some NACK/RTX traffic all along
        pid = c.daemon.proc.pid
        samples = []
        t0 = time.monotonic()
        while time.monotonic() - t0 < minutes * 60 and c.daemon.proc.returncode is None:
            rss, fds, _ = process_sample(pid)
            samples.append((round(time.monotonic() - t0, 1), rss, fds))
            await asyncio.sleep(10)
        (c.dir / "samples.json").write_text(json.dumps(samples))
        warm = [x for x in samples if x[0] >= min(120, minutes * 60 * 0.2)]
        if len(warm) < 3:
            return check(r, False, f"too few samples ({len(samples)})", samples=len(samples))
        ts, rss, fds = [x[0] for x in warm], [x[1] for x in warm], [x[2] for x in warm]
        slope = statistics.linear_regression(ts, rss).slope * 600          # KiB per 10 minutes
        rep = await c.report()
        f = frame_figures(rep["frames"], t0 + warm[0][0], time.monotonic())
        alive = c.daemon.proc.returncode is None
        # No trend: under 2 % of the resident size per 10 minutes (and under 4 MiB), and fds back to where they were.
        ok = alive and slope < min(0.02 * statistics.mean(rss), 4096) and max(fds) - fds[0] <= 2
        return check(r, ok, f"RSS {rss[0] / 1024:.1f} → {rss[-1] / 1024:.1f} MiB (trend {slope / 1024:+.2f} MiB per 10 min), "
                            f"fds {fds[0]} → {fds[-1]} (max {max(fds)}); {f['fps']} fps",
                     samples=len(samples), rss_start_kib=rss[0], rss_end_kib=rss[-1], rss_trend_kib_per_10min=round(slope),
                     fds_start=fds[0], fds_end=fds[-1], fds_max=max(fds), fps=f["fps"], freezes_over_1s=f["freezes_over_1s"])
