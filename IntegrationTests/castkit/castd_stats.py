"""castd's `event=stats` log lines (every 5 s) read from a running Daemon
(castd_proc.Daemon): its counters and per-stage times, for tests and
measurements that compare two moments of a cast."""
from __future__ import annotations

import asyncio
import re
import time


def stats_lines(daemon) -> list[tuple[float, dict]]:
    """Every stats line so far as (arrival time.monotonic(), {field: value}); integer
    fields as int, the rest (e.g. `encode_ms=p50/p95/max`, `usage=normal`) as str."""
    out = []
    for t, line in zip(daemon.stderr_times, daemon.stderr_lines):
        if "event=stats" in line:
            fields = dict(re.findall(r"(\w+)=(\S+)", line))
            out.append((t, {k: int(v) if re.fullmatch(r"-?\d+", v) else v for k, v in fields.items()}))
    return out


async def next_stats(daemon, after: float, timeout: float = 15) -> tuple[float, dict]:
    """The first stats line that arrived after `after` (time.monotonic()): (arrival, fields)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        later = [(t, s) for t, s in stats_lines(daemon) if t > after]
        if later:
            return later[0]
        await asyncio.sleep(0.2)
    raise AssertionError(f"no castd stats line within {timeout:.0f} s")
