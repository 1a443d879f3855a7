"""The headless Mutter rig: a real compositor whose screen cast carries the test picture.

These tests read the cast with GStreamer, not castd: they prove the rig that
castd's Wayland backends are tested on (issue #9) shows what it should.
"""
import numpy as np
import pytest

from castkit.mutter_rig import MutterRig, missing_tools

BARS = [(0xBF, 0xBF, 0xBF), (0xBF, 0xBF, 0), (0, 0xBF, 0xBF), (0, 0xBF, 0), (0xBF, 0, 0xBF), (0xBF, 0, 0), (0, 0, 0xBF)]

pytestmark = pytest.mark.skipif(bool(missing_tools()), reason=f"rig tools missing: {missing_tools()}")


def bar_means(frame: np.ndarray) -> list[tuple[int, int, int]]:
    h, w, _ = frame.shape
    out = []
    for i in range(len(BARS)):
        x0, x1 = int((i + 0.3) * w / len(BARS)), int((i + 0.7) * w / len(BARS))
        patch = frame[h // 6: h // 2, x0:x1].reshape(-1, 3)
        out.append(tuple(int(v) for v in patch.mean(axis=0).round()))
    return out


@pytest.mark.timeout(90)
def test_mutter_screencast_carries_the_moving_pattern():
    with MutterRig(1280, 720) as rig:
        node = rig.screencast()
        frames = rig.grab(node, count=3)
    assert all(f.shape == (720, 1280, 3) for f in frames)
    for got, want in zip(bar_means(frames[-1]), BARS):
        assert max(abs(g - w) for g, w in zip(got, want)) <= 3, (got, want)
    # The bottom band holds the moving box: consecutive frames differ there, the bars do not.
    bottom = [f[2 * 720 // 3:].astype(int) for f in frames]
    assert any(np.abs(a - b).sum() > 0 for a, b in zip(bottom, bottom[1:]))
    assert np.array_equal(frames[0][: 720 // 2], frames[-1][: 720 // 2])


@pytest.mark.timeout(90)
def test_two_rigs_run_side_by_side_with_their_own_sizes():
    with MutterRig(640, 480) as a, MutterRig(800, 600) as b:
        fa = a.grab(a.screencast(), count=1)[0]
        fb = b.grab(b.screencast(), count=1)[0]
    assert fa.shape == (480, 640, 3) and fb.shape == (600, 800, 3)
    assert a.runtime_dir == "" and b.runtime_dir == ""
