"""Fixtures of the interop tests (castd dev-send against aiortc and coturn)."""
import pathlib
import subprocess

import pytest


@pytest.fixture(scope="session")
def bars_clip(tmp_path_factory) -> pathlib.Path:
    """4 s of SMPTE colour bars at 640x360, 30 fps, Constrained Baseline, an IDR every second."""
    path = tmp_path_factory.mktemp("clip") / "bars.264"
    subprocess.run([
        "ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", "smptebars=size=640x360:rate=30", "-t", "4",
        "-c:v", "libx264", "-profile:v", "baseline", "-level", "3.1", "-pix_fmt", "yuv420p",
        "-x264-params", "keyint=30:min-keyint=30:scenecut=0:bframes=0", "-f", "h264", str(path),
    ], check=True)
    return path
