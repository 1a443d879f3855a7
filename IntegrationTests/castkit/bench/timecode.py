"""The on-glass timecode: CLOCK_MONOTONIC drawn as a grid of black and white blocks.

Layout (screen pixels, top-left corner of the screen): COLS × ROWS cells of
CELL × CELL pixels, row-major, cell i carries bit i (LSB first):

    bits  0..31  microseconds of CLOCK_MONOTONIC, modulo 2**32 (wraps every 71 min)
    bits 32..39  the painter's frame counter, modulo 256
    bits 40..47  check byte: (sum of the five bytes above) XOR 0xA5

White is 1, black is 0. The cells are large (32 px) so that they survive a
downscale (2560×1440 → 1920×1080) and a 2.5–4 Mbps H.264 encode: the reader
averages the middle of each cell in the decoded luma plane and thresholds at
mid-grey; the check byte rejects a frame whose code was torn or smeared.
Both ends run on one machine and read the same clock, so the receiver turns
the 32-bit value back into a full time by taking the nearest one before now.
"""
from __future__ import annotations

import time

import numpy as np

COLS, ROWS, CELL = 8, 6, 32
BITS = COLS * ROWS
WRAP = 1 << 32


def now_us() -> int:
    return time.monotonic_ns() // 1000


def check_byte(value: int, frame: int) -> int:
    return (sum(value.to_bytes(4, "little")) + (frame & 0xFF)) & 0xFF ^ 0xA5


def encode(t_us: int, frame: int) -> list[int]:
    """The 48 bits for time `t_us` (µs, CLOCK_MONOTONIC) and frame counter `frame`."""
    v = t_us % WRAP
    word = v | (frame & 0xFF) << 32 | check_byte(v, frame) << 40
    return [(word >> i) & 1 for i in range(BITS)]


def cells(scale: float = 1.0) -> list[tuple[int, int, int]]:
    """(x, y, size) of each cell, in a picture scaled by `scale` from the screen."""
    c = CELL * scale
    return [(int(col * c), int(row * c), max(1, int(c))) for row in range(ROWS) for col in range(COLS)]


def rects(t_us: int, frame: int) -> tuple[list, list]:
    """(white, black) cell rectangles (x, y, w, h) on the screen for time `t_us`, frame `frame`."""
    bits = encode(t_us, frame)
    ones = [(x, y, s, s) for (x, y, s), b in zip(cells(), bits) if b]
    zeros = [(x, y, s, s) for (x, y, s), b in zip(cells(), bits) if not b]
    return ones, zeros


def read_luma(y_plane: np.ndarray, scale: float) -> tuple[int, int] | None:
    """(32-bit time value, frame counter) from a luma plane (h × stride, uint8),
    or None when the check byte does not match."""
    c = CELL * scale
    r = max(1, int(c / 4))
    word = 0
    for i in range(BITS):
        row, col = divmod(i, COLS)
        cx, cy = int((col + 0.5) * c), int((row + 0.5) * c)
        patch = y_plane[cy - r:cy + r, cx - r:cx + r]
        if patch.size == 0:
            return None
        if patch.mean() >= 126:
            word |= 1 << i
    v, frame, chk = word & 0xFFFFFFFF, (word >> 32) & 0xFF, (word >> 40) & 0xFF
    if chk != check_byte(v, frame):
        return None
    return v, frame


def unwrap(value: int, now: int) -> int:
    """The full µs time whose low 32 bits are `value`, at or before `now` (µs)."""
    return now - ((now - value) % WRAP)
