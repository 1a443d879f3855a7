"""The bench's on-glass timecode (IntegrationTests/castkit/bench/timecode.py): what the painter
draws, the receiver reads back, also after the 2560→1920 downscale, and a
torn code is rejected rather than misread."""

import numpy as np
import pytest

from castkit.bench import timecode

BLACK, WHITE = 16, 235   # limited-range luma


def picture(t_us: int, frame: int) -> np.ndarray:
    y = np.full((300, 400), 128, np.uint8)
    for (x, yy, s), bit in zip(timecode.cells(), timecode.encode(t_us, frame)):
        y[yy:yy + s, x:x + s] = WHITE if bit else BLACK
    return y


@pytest.mark.parametrize("t_us,frame", [(0, 0), (123_456_789_012, 7), (2**32 - 1, 255), (98_765, 300)])
def test_code_reads_back_at_full_size_and_downscaled(t_us, frame):
    y = picture(t_us, frame)
    assert timecode.read_luma(y, 1.0) == (t_us % 2**32, frame % 256)
    rows, cols = (np.arange(225) / 0.75).astype(int), (np.arange(300) / 0.75).astype(int)
    assert timecode.read_luma(y[rows][:, cols], 0.75) == (t_us % 2**32, frame % 256)


def test_a_flipped_cell_fails_the_check_byte():
    y = picture(5_000_000, 3)
    y[0:32, 0:32] = WHITE + BLACK - y[16, 16]   # cell 0 (bit 0 of the time) inverted
    assert timecode.read_luma(y, 1.0) is None


def test_unwrap_takes_the_nearest_time_at_or_before_now():
    now = 3 * 2**32 + 1000
    assert timecode.unwrap(900, now) == 3 * 2**32 + 900
    assert timecode.unwrap(2000, now) == 2 * 2**32 + 2000
