"""Scripts/faults rows for desktop audio (issue 18): castd --session with a private
PipeWire playing a 1 kHz tone, to the stack's viewer in headless Chromium.

Each row runs one test of IntegrationTests/daemon/test_cast_audio_chromium.py in a child
pytest (its own stack, PipeWire, Xvfb and Chromium, all on loopback) and reports what it
printed. Scripts/faults.py appends `rows(faults module)` to its scenarios (full set only).
"""
from __future__ import annotations

import asyncio
import re
import sys
import time
from pathlib import Path

from castkit.paths import REPO
from faultkit.world import Result, check

TESTS = REPO / "IntegrationTests" / "daemon" / "test_cast_audio_chromium.py"


def rows() -> list[tuple]:
    """The audio rows in Scripts/faults' SCENARIOS shape."""

    async def pytest_row(w, name: str, test: str, expected: str):
        r = Result(name, expected, "")
        out = w.out / name
        out.mkdir(parents=True, exist_ok=True)
        t = time.monotonic()
        p = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", f"{TESTS}::{test}",
            cwd=str(REPO), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        text, _ = await asyncio.wait_for(p.communicate(), 300)
        log = text.decode(errors="replace")
        (out / "pytest.log").write_text(log)
        figures = {"seconds": round(time.monotonic() - t, 1)}
        m = re.search(r"received (\d+) samples, concealed (\d+) \(([\d.]+) %\)", log)
        if m:
            figures.update(samples_received=int(m[1]), concealed=int(m[2]), concealed_percent=float(m[3]))
        passed = p.returncode == 0
        tail = next((l for l in reversed(log.splitlines()) if " passed" in l or " failed" in l or "error" in l), "")
        observed = (f"{figures.get('concealed_percent', '?')} % of {figures.get('samples_received', '?')} samples concealed; "
                    if m else "") + (tail.strip("= ") or f"pytest exited {p.returncode}")
        return check(r, passed, observed, **figures)

    return [
        ("audio: Chromium plays the tone", False, pytest_row,
         ("audio: Chromium plays the tone", "test_chromium_plays_castds_desktop_audio_with_little_concealment",
          "totalSamplesReceived rises, concealedSamples < 2 % on a clean link, stereo=1 kept, a level"), {}),
        ("audio: viewer rejects audio", False, pytest_row,
         ("audio: viewer rejects audio", "test_a_viewer_rejecting_audio_still_gets_video",
          "audio m-line answered inactive: one audio_rejected line, video decodes"), {}),
        ("audio: --audio off", False, pytest_row,
         ("audio: --audio off", "test_audio_off_offers_video_only", "no audio m-line offered, video decodes"), {}),
    ]
