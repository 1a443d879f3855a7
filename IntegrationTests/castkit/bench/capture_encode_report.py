"""Merges the castd stage benches (Swift, JSON lines with "bench") and the
GStreamer runs (gst_capture_encode.py) read from stdin into one JSON object:
every run as measured, plus per scenario castd's default path (capture +
convert + encode at preset superfast) side by side with GStreamer's, and the
castd / GStreamer ratios (below 1: castd is faster or smaller)."""
from __future__ import annotations

import json
import sys

from castkit.bench.host import machine
from castkit.bench.stats import ratio


def side(capture: dict | None, ce: dict | None) -> dict:
    def p50(run, key):
        return (run or {}).get(key, {}).get("p50")
    parts = [p50(capture, "capture_ms"), p50(ce, "convert_ms"), p50(ce, "encode_ms")]
    cpu = [(r or {}).get("cpu_ms_per_frame") for r in (capture, ce)]
    return {"capture_p50_ms": parts[0], "convert_p50_ms": parts[1], "encode_p50_ms": parts[2],
            "sum_of_p50_ms": round(sum(parts), 3) if None not in parts else None,
            "cpu_ms_per_frame": round(sum(cpu), 2) if None not in cpu else None,
            "max_rss_mib": max([(r or {}).get("max_rss_mib") or 0 for r in (capture, ce)]) or None,
            "bitrate_bps": (ce or {}).get("bitrate_bps")}


def report(lines: list[str]) -> dict:
    runs = [json.loads(l) for l in lines if l.startswith('{"bench"')]
    castd = [r for r in runs if not r["bench"].startswith("gstreamer")]
    gst = [r for r in runs if r["bench"].startswith("gstreamer")]
    comparison = []
    for scenario in ("static", "busy"):
        cap = next((r for r in castd if r["bench"] == "capture" and r["scenario"] == scenario), None)
        ce = next((r for r in castd if r["bench"] == "convert-encode" and r["scenario"] == scenario
                   and r.get("preset") == "superfast"), None)
        g = next((r for r in gst if r["scenario"] == scenario), None)
        if not (cap or ce or g):
            continue
        a = side(cap, ce) if (cap or ce) else None
        b = side(g, g) if g else None
        if b and g:
            b["max_rss_mib"] = g.get("max_rss_mib")
        entry = {"scenario": scenario, "size": "1920x1080", "castd": a, "gstreamer": b}
        if a and b:
            entry["castd_over_gstreamer"] = {k: ratio(a[k], b[k]) for k in a if k != "bitrate_bps"}
        comparison.append(entry)
    return {"machine": machine(), "comparison": comparison, "castd_runs": castd, "gstreamer_runs": gst,
            "notes": ["castd stages run back to back in swift-testing processes (capture under Xvfb with 40 random "
                      "rectangles per frame when busy; convert+encode on the same busy block field in memory); "
                      "GStreamer runs ximagesrc at 30 fps on an Xvfb screen showing that block field scrolled",
                      "sum_of_p50_ms adds the stage medians; cpu_ms_per_frame is user+sys CPU of the measuring "
                      "process per frame (Xvfb and the painter not counted)",
                      "max_rss_mib is of the measuring process: the swift-testing runner for castd, Python + "
                      "GStreamer for GStreamer (rss_before_pipeline_mib in its run is the Python share)"]}


if __name__ == "__main__":
    out = report(sys.stdin.read().splitlines())
    if not out["castd_runs"] and not out["gstreamer_runs"]:
        sys.exit("bench-capture-encode: no results (build, Xvfb or GStreamer failed; run the parts by hand)")
    print(json.dumps(out, indent=1, sort_keys=True))
