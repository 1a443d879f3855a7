"""Smoke test of the benchmark scripts (benchmarks are never pass/fail on their
figures): the GStreamer half of `Scripts/bench-capture-encode --quick` runs and
prints the JSON report with a measured value for every stage. The Swift half
needs a release build of the test targets and is not run here."""
import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(120)
def test_bench_capture_encode_quick_gst_only_prints_json():
    r = subprocess.run([str(ROOT / "Scripts" / "bench-capture-encode"), "--quick", "--gst-only"],
                       capture_output=True, text=True, timeout=110, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    runs = {g["scenario"]: g for g in out["gstreamer_runs"]}
    assert set(runs) == {"static", "busy"}
    for run in runs.values():
        assert run["frames"] == 40
        for stage in ("capture_ms", "convert_ms", "encode_ms"):
            assert run[stage]["p50"] is not None and run[stage]["p50"] >= 0, (stage, run)
        assert run["cpu_ms_per_frame"] > 0 and run["max_rss_mib"] > 0
    # the busy screen moves, so x264 spends bits on it
    assert runs["busy"]["bitrate_bps"] > 100_000, runs["busy"]
    assert [c["scenario"] for c in out["comparison"]] == ["static", "busy"]
