"""The bench's aiortc receiver answers like Chromium: transport-cc feedback, no REMB
(castkit/twcc_feedback.py). castd must negotiate the extension with it, read its
feedback (an acknowledged rate in its `stats` line) and run its send-side
estimate from it, with no REMB in play. Were the feedback malformed or its
sequence numbers off, castd would report no acknowledged rate, or count the
packets as lost and cut its target to the floor.
"""
import re

import pytest

from castkit.castd_proc import answered_cast, castd_env
from castkit import twcc_feedback
from castkit.xscreen import XScreen


def _fields(line: str) -> dict:
    return dict(m.groups() for m in re.finditer(r"(\w+)=(\S+)", line))


@pytest.mark.timeout(90)
async def test_castd_runs_its_estimate_on_the_bench_receivers_transport_cc_feedback(stack, tmp_path):
    screen = await XScreen(1280, 720).start()
    try:
        with twcc_feedback.installed():
            async with answered_cast(stack, tmp_path, castd_env(stack, tmp_path, DISPLAY=screen.display),
                                     prefs={"resolution": "720p", "frameRate": 30}) as (answerer, daemon):
                await answerer.wait_frames(20, timeout=40)
                # two stats lines: the second covers a stretch with feedback flowing
                await daemon.wait_log("event=stats", timeout=20)
                first = sum("event=stats" in l for l in daemon.stderr_lines)
                seen = len(answerer.frames)
                while sum("event=stats" in l for l in daemon.stderr_lines) == first:
                    assert daemon.proc.returncode is None, "\n".join(daemon.stderr_lines[-20:])
                    seen += 1
                    await answerer.wait_frames(seen, timeout=20)
    finally:
        screen.stop()
    stats = [_fields(l) for l in daemon.stderr_lines if "event=stats" in l]
    targets = [_fields(l) for l in daemon.stderr_lines if "event=rate_target" in l]
    assert stats, "castd logged no stats line"
    last = stats[-1]
    assert int(last["acked_kbps"]) > 0, f"no acknowledged rate: castd read no transport-cc feedback ({last})"
    # Loopback has no bottleneck: the estimate must not have been cut to the floor by
    # feedback that reported delivered packets as lost.
    assert max(int(t["media_kbps"]) for t in targets) >= 1000, targets
    assert float(targets[-1]["loss"]) < 0.05, targets[-1]
