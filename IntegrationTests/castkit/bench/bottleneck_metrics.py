"""Figures of one Scripts/bench --bottleneck run, from what the Chromium receiver saw.

Pure functions over recorded samples (no IO), so a recorded run can be re-read and tested:

- frames: [(t, code)] one per frame the viewer's <video> presented, t in time.monotonic()
  seconds, code the 6 bytes of the on-glass timecode read from it (or None);
- stats: the viewer page's getStats summaries (window.castdViewer.stats, one a second), each
  with "t" (monotonic s);
- link: tbf samples [{"t", "rate_kbit", "backlog_bytes", "sent_bytes", "drops"}] (the queue
  on the sender's egress; rate None on a free link);
- steps: [(t, rate_kbit)] when the link's rate changed (the first is the start).
"""
from __future__ import annotations

import math

from castkit.bench import timecode
from castkit.bench.stats import quantile

SETTLE_QUEUE_MS = 50        # a step down has settled when tbf's queue stays under this (issue 14)
SETTLE_HOLD_S = 2.0         # … for this long
SETTLE_RATE_FRACTION = 0.8  # a step up has settled when the delivered rate reaches this share of the capacity
                            # (or of the sender's median rate on the first segment, if lower)
FREEZE_GAP_S = 1.0          # the targets' freeze: no presented frame for longer than this


def decode_timecode(code: list[int] | None, t: float) -> float | None:
    """The monotonic time (s) a frame's timecode was drawn, from its 6 bytes (LSB first), or
    None when the check byte fails; the 32-bit µs value is unwrapped against t."""
    if not code or len(code) != 6:
        return None
    word = sum((b & 0xFF) << (8 * i) for i, b in enumerate(code))
    v, frame, chk = word & 0xFFFFFFFF, (word >> 32) & 0xFF, (word >> 40) & 0xFF
    if chk != timecode.check_byte(v, frame):
        return None
    return timecode.unwrap(v, int(t * 1e6)) / 1e6


def glass_to_glass(frames) -> list[tuple[float, float]]:
    """(presented at, glass-to-glass ms) of every presented frame with a readable code."""
    out = []
    for t, code in frames:
        drawn = decode_timecode(code, t)
        if drawn is not None and 0 <= t - drawn < 60:
            out.append((t, (t - drawn) * 1000))
    return out


def latencies_ms(frames: list, t0: float, t1: float) -> list[float]:
    """Glass-to-glass ms of every presented frame in [t0, t1] with a readable code."""
    return [g for t, g in glass_to_glass(f for f in frames if t0 <= f[0] <= t1)]


def per_second_counts(times: list[float], t0: float, t1: float) -> list[int]:
    n = max(1, int(t1 - t0))
    bins = [0] * n
    for t in times:
        i = math.floor(t - t0)          # not int(): a frame just before t0 is not in the first second
        if 0 <= i < n:
            bins[i] += 1
    return bins


def max_gap(times: list[float], t0: float, t1: float) -> float:
    inside = [t for t in times if t0 <= t <= t1]
    edges = [t0] + inside + [t1]
    return max(b - a for a, b in zip(edges, edges[1:]))


def gaps_over(times: list[float], t0: float, t1: float, limit: float) -> list[float]:
    inside = [t for t in times if t0 <= t <= t1]
    edges = [t0] + inside + [t1]
    return [round(b - a, 3) for a, b in zip(edges, edges[1:]) if b - a > limit]


def _at(stats: list[dict], t: float) -> dict | None:
    """The last stats sample at or before t (the first one if none is)."""
    best = None
    for s in stats:
        if s["t"] <= t:
            best = s
    return best or (stats[0] if stats else None)


def _delta(a: dict, b: dict, key: str):
    if a is None or b is None or b.get(key) is None:
        return None
    return b[key] - (a.get(key) or 0)


def rate_series(stats: list[dict]) -> list[tuple[float, float]]:
    """(t, delivered Mbit/s) between consecutive getStats samples (payload bytes received)."""
    out = []
    for a, b in zip(stats, stats[1:]):
        dt = b["t"] - a["t"]
        if dt > 0 and b.get("bytesReceived") is not None and a.get("bytesReceived") is not None:
            out.append((b["t"], (b["bytesReceived"] - a["bytesReceived"]) * 8 / dt / 1e6))
    return out


def queue_ms(sample: dict) -> float | None:
    """tbf's queue in ms of its rate (None on a free link)."""
    r = sample.get("rate_kbit")
    if not r:
        return None
    return sample.get("backlog_bytes", 0) * 8 / (r * 1000) * 1000


def settle_times(steps: list[tuple[float, float | None]], link: list[dict], rates: list[tuple[float, float]],
                 t_end: float) -> list[dict]:
    """For each change of the link's rate after the first: seconds until it settled, or None
    if it did not before the next change. Down: tbf's queue under SETTLE_QUEUE_MS for
    SETTLE_HOLD_S. Up: the delivered rate at ≥ SETTLE_RATE_FRACTION of the new capacity, or of
    the sender's median delivered rate on the first segment (after 5 s) when that is lower."""
    out = []
    for i in range(1, len(steps)):
        t, rate = steps[i]
        prev = steps[i - 1][1]
        t_next = steps[i + 1][0] if i + 1 < len(steps) else t_end
        entry = {"at_s": round(t - steps[0][0], 1), "from_kbit": prev, "to_kbit": rate, "settle_s": None}
        if rate is not None and prev is not None and rate < prev:
            entry["kind"] = "down"
            qs = [(s["t"], queue_ms(s)) for s in link if t <= s["t"] <= t_next and queue_ms(s) is not None]
            for j, (ts, q) in enumerate(qs):
                hold = [x for tt, x in qs[j:] if tt <= ts + SETTLE_HOLD_S]
                if q < SETTLE_QUEUE_MS and all(x < SETTLE_QUEUE_MS for x in hold) and ts + SETTLE_HOLD_S <= t_next:
                    entry["settle_s"] = round(ts - t, 2)
                    break
        else:
            entry["kind"] = "up"
            # What the sender can use: the new capacity, or what it delivered on the first
            # segment if that was less (a sender capped at 4 Mbit/s never fills 8).
            first = [m for ts, m in rates if steps[0][0] + 5 < ts <= steps[1][0]]
            cap = min((rate or 0) / 1000, sorted(first)[len(first) // 2]) if first else (rate or 0) / 1000
            entry["reference_mbps"] = round(cap, 3)
            for ts, mbps in rates:
                if t < ts <= t_next and cap and mbps >= SETTLE_RATE_FRACTION * cap:
                    entry["settle_s"] = round(ts - t, 2)
                    break
        out.append(entry)
    return out


FALL_BOUND_MS = 100.0        # issue 32: after a sharp fall, glass to glass back under this within 1 s
QUEUE_EMPTY_MS = 50.0        # tbf's backlog under this: the standing queue is gone (a frame in flight may remain)


def falls(frames: list, steps: list[tuple[float, float | None]], t_end: float, bound_ms: float = FALL_BOUND_MS,
          link: list[dict] | None = None) -> list[dict]:
    """Per fall in capacity (a step to a lower rate), over the frames presented from the fall to
    the next step: `drained_s`, from the fall to the first frame after the last one whose glass
    to glass was over `bound_ms` (0 when none was; None when the segment's last frame still
    was); `worst_after_1s_ms`, the slowest frame presented from one second after the fall; and
    the longest gap between presented frames (from the fall on).

    Glass to glass also counts each frame's own time on the link (a 15 kB frame is 100 ms at
    1.2 Mbit/s), so with `link` (tbf samples) the queue itself is judged too: `queue_peak_ms`,
    tbf's deepest backlog in the segment; `queue_emptied_s`, from the fall to the first sample
    after that peak under QUEUE_EMPTY_MS (None if none came before the next step); and
    `queue_after_1s_ms`, the mean backlog from one second after the fall."""
    out = []
    for i in range(1, len(steps)):
        at, rate = steps[i]
        before = steps[i - 1][1]
        if rate is None or (before is not None and rate >= before):
            continue
        end = steps[i + 1][0] if i + 1 < len(steps) else t_end
        seg = glass_to_glass(f for f in frames if at <= f[0] < end)
        slow = [k for k, (_, g) in enumerate(seg) if g > bound_ms]
        if not slow:
            drained = 0.0
        elif slow[-1] + 1 < len(seg):
            drained = round(seg[slow[-1] + 1][0] - at, 2)
        else:
            drained = None
        later = [g for t, g in seg if t >= at + 1]
        entry = {"at_s": round(at - steps[0][0], 2), "to_kbit": rate, "drained_s": drained,
                 "worst_after_1s_ms": round(max(later), 1) if later else None,
                 "longest_gap_s": round(max_gap([t for t, _ in frames], at, end), 2)}
        qs = [(s["t"], q) for s in (link or []) if at <= s["t"] < end and (q := queue_ms(s)) is not None]
        if qs:
            peak = max(range(len(qs)), key=lambda k: qs[k][1])
            emptied = next((t for t, q in qs[peak:] if q < QUEUE_EMPTY_MS), None)
            after = [q for t, q in qs if t >= at + 1]
            entry.update(queue_peak_ms=round(qs[peak][1], 1),
                         queue_emptied_s=round(emptied - at, 2) if emptied is not None else None,
                         queue_after_1s_ms=round(sum(after) / len(after), 1) if after else None)
        out.append(entry)
    return out


def summarize(frames: list, stats: list[dict], link: list[dict], steps: list, t0: float, t1: float) -> dict:
    """The figures of one sender in one scenario over the window [t0, t1]."""
    span = t1 - t0
    times = [t for t, _ in frames]
    sw = [s for s in stats if t0 - 1.5 <= s["t"] <= t1 + 1.5]
    a, b = _at(stats, t0), _at(stats, t1)
    lat = latencies_ms(frames, t0, t1)
    per_s = per_second_counts(times, t0, t1)
    lost, recv = _delta(a, b, "packetsLost"), _delta(a, b, "packetsReceived")
    dec = _delta(a, b, "framesDecoded")
    dt_stats = (b["t"] - a["t"]) if a and b else 0
    rtts = [s["roundTripTimeMs"] for s in sw if s.get("roundTripTimeMs") is not None and t0 <= s["t"] <= t1]
    qs = [q for s in link if t0 <= s["t"] <= t1 and (q := queue_ms(s)) is not None]
    sizes: dict[str, int] = {}
    for s in sw:
        if s.get("frameWidth"):
            k = f"{s['frameWidth']}x{s['frameHeight']}"
            sizes[k] = sizes.get(k, 0) + 1
    rates = rate_series(stats)
    in_win = [m for t, m in rates if t0 < t <= t1]
    out = {
        "window_s": round(span, 1),
        "fps_mean": round(sum(per_s) / len(per_s), 2) if per_s else 0.0,
        "fps_worst_second": min(per_s) if per_s else 0,
        "decoded_fps": round(dec / dt_stats, 2) if dec is not None and dt_stats > 0 else None,
        "resolutions": sizes,
        "resolution": max(sizes, key=sizes.get) if sizes else None,
        # the decoder's mean QP over the window (getStats qpSum / framesDecoded; issue 32)
        "decoder_qp_mean": round(_delta(a, b, "qpSum") / dec, 2) if dec and _delta(a, b, "qpSum") is not None else None,
        "freezes": _delta(a, b, "freezeCount"),
        "freezes_s": round(_delta(a, b, "totalFreezesDuration"), 2) if _delta(a, b, "totalFreezesDuration") is not None else None,
        "gaps_over_1s": gaps_over(times, t0, t1, FREEZE_GAP_S),
        "longest_gap_s": round(max_gap(times, t0, t1), 2),
        "packets_lost": lost, "packets_received": recv,
        "loss_percent": round(100 * lost / (lost + recv), 2) if lost is not None and recv and lost + recv > 0 else None,
        "delivered_mbps": round((_delta(a, b, "bytesReceived") or 0) * 8 / dt_stats / 1e6, 3) if dt_stats > 0 else None,
        "delivered_mbps_min_1s": round(min(in_win), 3) if in_win else None,
        "rtt_ms_median": round(quantile(rtts, 0.5), 1) if rtts else None,
        "rtt_ms_p95": round(quantile(rtts, 0.95), 1) if rtts else None,
        "queue_ms_median": round(quantile(qs, 0.5), 1) if qs else None,
        "queue_ms_p95": round(quantile(qs, 0.95), 1) if qs else None,
        "glass_to_glass_ms_median": round(quantile(lat, 0.5), 1) if lat else None,
        "glass_to_glass_ms_p95": round(quantile(lat, 0.95), 1) if lat else None,
        "readable_timecode_fraction": round(len(lat) / max(1, sum(1 for t in times if t0 <= t <= t1)), 3),
        "nacks": _delta(a, b, "nackCount"), "plis": _delta(a, b, "pliCount"),
        "retransmitted_packets_received": _delta(a, b, "retransmittedPacketsReceived"),
    }
    if len(steps) > 1:
        out["settle"] = settle_times(steps, link, rates, t1)
        out["falls"] = falls(frames, steps, t1, link=link)
    return out


RATIO_KEYS = ("fps_mean", "fps_worst_second", "freezes_s", "loss_percent", "delivered_mbps", "rtt_ms_median",
              "queue_ms_median", "glass_to_glass_ms_median", "glass_to_glass_ms_p95")


def ratios(castd: dict | None, other: dict | None) -> dict:
    """castd / libwebrtc for the headline figures (None where either is missing or zero)."""
    out = {}
    for k in RATIO_KEYS:
        x, y = (castd or {}).get(k), (other or {}).get(k)
        out[k] = round(x / y, 3) if isinstance(x, (int, float)) and isinstance(y, (int, float)) and y and not math.isnan(y) else None
    return out


def targets_2mbit(castd: dict, other: dict | None) -> dict:
    """Issue 14's targets at 2 Mbit/s steady: True/False each (None when not measurable)."""
    g = castd.get("glass_to_glass_ms_median")
    og = (other or {}).get("glass_to_glass_ms_median")
    return {
        "1920x1080 kept": castd.get("resolution") == "1920x1080" and len(castd.get("resolutions", {})) == 1,
        ">= 15 fps mean": castd.get("fps_mean", 0) >= 15,
        "no freeze over 1 s after 5 s": not castd.get("gaps_over_1s"),
        "loss <= 1 %": castd.get("loss_percent") is not None and castd["loss_percent"] <= 1,
        "glass-to-glass median <= 200 ms": g is not None and g <= 200,
        "glass-to-glass median <= libwebrtc's": (g is not None and og is not None and g <= og) if og is not None else None,
    }


def targets_steps(castd: dict) -> dict:
    st = castd.get("settle") or []
    downs = [s for s in st if s.get("kind") == "down"]
    ups = [s for s in st if s.get("kind") == "up"]
    return {
        "queue < 50 ms within 5 s of the step down": bool(downs) and all(s["settle_s"] is not None and s["settle_s"] <= 5 for s in downs),
        ">= 80 % of capacity within 10 s of the step up": bool(ups) and all(s["settle_s"] is not None and s["settle_s"] <= 10 for s in ups),
    }
