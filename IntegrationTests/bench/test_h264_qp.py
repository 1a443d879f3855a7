"""The quality rows' slice-QP reader (castkit/bench/h264_qp.py) against ffmpeg's own reading of
the same headers (its trace_headers bitstream filter), on x264 streams as different as the
senders': Constrained Baseline in two slices (castd's, GStreamer's), and High with B-frames,
CABAC and weighted prediction."""
import re
import shutil
import subprocess

import pytest

from castkit.bench.h264_qp import SliceQP

pytestmark = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs ffmpeg")

STREAMS = {
    "baseline-2-slices": ["-profile:v", "baseline", "-x264-params", "slices=2", "-b:v", "300k"],
    "high-b-frames-weighted": ["-profile:v", "high", "-bf", "3", "-x264-params", "slices=3:weightp=2:ref=3",
                               "-b:v", "200k"],
}


def expected_qps(path) -> list[int]:
    """Every slice's QP as ffmpeg reads it: 26 + pic_init_qp_minus26 + slice_qp_delta."""
    trace = subprocess.run(["ffmpeg", "-hide_banner", "-i", str(path), "-c", "copy", "-bsf:v", "trace_headers",
                            "-f", "null", "-"], capture_output=True, text=True, check=True).stderr
    init, qps = None, []
    for line in trace.splitlines():
        if m := re.search(r"pic_init_qp_minus26\s+\S+ = (-?\d+)", line):
            init = 26 + int(m.group(1))
        elif m := re.search(r"slice_qp_delta\s+\S+ = (-?\d+)", line):
            qps.append(init + int(m.group(1)))
    return qps


@pytest.mark.parametrize("name", STREAMS)
def test_every_slice_qp_is_the_one_ffmpeg_reads(tmp_path, name):
    path = tmp_path / f"{name}.264"
    subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-f", "lavfi",
                    "-i", "testsrc2=size=320x240:rate=30", "-frames:v", "40", "-c:v", "libx264",
                    *STREAMS[name], "-y", str(path)], check=True)
    want = expected_qps(path)
    assert len(want) >= 40 and len(set(want)) > 3      # many slices, and QPs that vary
    got = SliceQP().access_unit(path.read_bytes())   # the whole stream as one run of NAL units
    assert got == want


def test_no_figure_without_parameter_sets_or_from_a_truncated_slice():
    parser = SliceQP()
    assert parser.access_unit(b"\x00\x00\x00\x01\x41\x9a\x00\x10") == []       # a P slice, no PPS seen
    assert parser.access_unit(b"\x00\x00\x01\x65") == []                       # an IDR slice with no header
    assert parser.access_unit(b"") == []


def test_random_and_damaged_streams_give_no_error_and_only_valid_qps(tmp_path):
    """What a lossy link hands the receiver: truncated and bit-flipped access units."""
    import random
    path = tmp_path / "s.264"
    subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-f", "lavfi",
                    "-i", "testsrc2=size=160x120:rate=30", "-frames:v", "10", "-c:v", "libx264",
                    *STREAMS["high-b-frames-weighted"], "-y", str(path)], check=True)
    good = path.read_bytes()
    rng = random.Random(7)
    parser = SliceQP()
    for _ in range(3000):
        data = bytearray(good[:rng.randrange(len(good))])
        for _ in range(rng.randrange(8)):
            if data:
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        if rng.random() < 0.3:
            data = bytearray(b"\x00\x00\x01") + bytearray(rng.randbytes(rng.randrange(64)))
        assert all(0 <= q <= 51 for q in parser.access_unit(bytes(data)))
