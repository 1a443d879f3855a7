"""The synthetic picture the reference sender streams, and how to read it back.

Layout (any size, proportions kept):
- top two thirds: eight vertical colour bars, fixed (for colour checks);
- bottom third, left: the frame counter as 16 black/white squares, most
  significant bit first, each square `cell` pixels wide (for frame identity);
- bottom third, right: a white box that moves one step per frame over grey
  (so the picture is never still and the encoder keeps producing frames).
"""
from __future__ import annotations

import numpy as np

# 75 % colour bars (ITU-R BT.801 style): saturated enough to survive 4:2:0 and
# H.264, far enough from each other to tell apart within a few percent.
BARS = [
    ("white", (191, 191, 191)),
    ("yellow", (191, 191, 0)),
    ("cyan", (0, 191, 191)),
    ("green", (0, 191, 0)),
    ("magenta", (191, 0, 191)),
    ("red", (191, 0, 0)),
    ("blue", (0, 0, 191)),
    ("black", (16, 16, 16)),
]
COUNTER_BITS = 16


class ColourBars:

    def __init__(self, width: int, height: int):
        if width % 2 or height % 2:
            raise ValueError("H.264 4:2:0 needs even dimensions")
        self.width, self.height = width, height
        self.bars_bottom = height * 2 // 3
        # The counter (one cell of margin, 16 cells) stays left of the moving box in the right half.
        self.cell = max(2, min(width // (2 * (COUNTER_BITS + 1)), (height - self.bars_bottom) // 2))
        base = np.full((height, width, 3), 64, dtype=np.uint8)
        for i, (_, rgb) in enumerate(BARS):
            x0, x1 = self.bar_span(i)
            base[: self.bars_bottom, x0:x1] = rgb
        self.base = base

    def bar_span(self, i: int) -> tuple[int, int]:
        return i * self.width // len(BARS), (i + 1) * self.width // len(BARS)

    def bar_centre(self, name: str) -> tuple[int, int]:
        i = [n for n, _ in BARS].index(name)
        x0, x1 = self.bar_span(i)
        return (x0 + x1) // 2, self.bars_bottom // 2

    def counter_origin(self) -> tuple[int, int]:
        return self.cell, self.bars_bottom + (self.height - self.bars_bottom - self.cell) // 2

    def frame(self, n: int) -> np.ndarray:
        img = self.base.copy()
        x0, y0 = self.counter_origin()
        c = self.cell
        for b in range(COUNTER_BITS):
            on = (n >> (COUNTER_BITS - 1 - b)) & 1
            img[y0 : y0 + c, x0 + b * c : x0 + (b + 1) * c] = 255 if on else 0
        # The moving box, right half of the bottom band.
        box = max(8, (self.height - self.bars_bottom) // 2)
        span = self.width // 2 - box
        bx = self.width // 2 + (n * 4) % max(1, span)
        by = self.bars_bottom + (self.height - self.bars_bottom - box) // 2
        img[by : by + box, bx : bx + box] = 255
        return img

    def read_counter(self, img: np.ndarray) -> int:
        """The frame number drawn into a (decoded) RGB image of the same size."""
        x0, y0 = self.counter_origin()
        c = self.cell
        n = 0
        for b in range(COUNTER_BITS):
            patch = img[y0 + c // 4 : y0 + 3 * c // 4, x0 + b * c + c // 4 : x0 + b * c + 3 * c // 4]
            n = (n << 1) | int(patch.mean() > 128)
        return n
