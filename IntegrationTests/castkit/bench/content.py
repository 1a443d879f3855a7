"""Deterministic screen content for the quality bench (issue 32): the source frame on glass
is a pure function of the timecode drawn on it, so the bench can redraw it exactly from a
decoded frame.

Each content is a few pre-rendered source images and a plan: for a time value `v` (the
32-bit µs value the timecode carries, timecode.py) the list of rectangle copies that make
the screen. The painter makes them with X CopyArea from server-side pixmaps, `render`
makes them with numpy slices: the same copies, so the same pixels (CopyArea between
pixmaps of the screen's depth copies bits). The first copy always covers the whole
screen, the timecode included, and the painter draws the timecode last, so a capture
taken between two requests shows no readable timecode and is skipped, never misattributed.

    text    a page of monospaced text scrolling up one line (28 px) a second
    slides  four slides (title, bullets, a coloured chart), each still for 5 s
    video   a still page of text with a moving picture (a smooth, colourful texture
            panned 240 × 120 px/s, a cut when the pan wraps) in its lower right ninth
    busy    the bench's busy field of random 8×8 blocks moved (9, 5) px per 1/30 s
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from castkit.bench import timecode
from castkit.bench.painter import FONT, MARGIN, TEXT_LINE, WORDS, busy_field, text_page

CONTENTS = ("text", "slides", "video", "busy")
TEXT_PX_PER_S = TEXT_LINE          # one line a second: reading speed
SLIDE_S = 5                        # each slide still this long
SLIDES = 4
VIDEO_PAN = (240, 120)             # px a second
VIDEO_MARGIN = 1024                # how far the pan goes before it wraps (a cut)
BUSY_STEP = (9, 5)                 # px per 1/30 s
US = 1_000_000


@dataclass(frozen=True)
class Copy:
    src: int        # index into Content.sources
    sx: int
    sy: int
    w: int
    h: int
    dx: int
    dy: int


class Content:
    """Sources (0x00RRGGBB uint32 arrays) and the copy plan of one content at one screen size."""

    def __init__(self, name: str, width: int, height: int):
        if name not in CONTENTS:
            raise ValueError(f"unknown content {name!r}: choose one of {', '.join(CONTENTS)}")
        self.name, self.width, self.height = name, width, height
        w, h = width, height
        if name == "text":
            page = text_page(w, h)
            self.sources = [page]
            self.period = page.shape[0] - h
        elif name == "slides":
            self.sources = [np.vstack([_slide(w, h, i) for i in range(SLIDES)])]
        elif name == "video":
            self.region = (w - w // 3 - w // 24, h - h // 3 - h // 24, w // 3, h // 3)   # x, y, w, h
            rw, rh = self.region[2], self.region[3]
            self.sources = [text_page(w, h)[:h], _texture(rw + VIDEO_MARGIN, rh + VIDEO_MARGIN)]
        else:
            self.sources = [busy_field(w, h)]

    def plan(self, v: int) -> list[Copy]:
        """The copies that make the screen at time value `v` (µs, the timecode's 32 bits)."""
        w, h = self.width, self.height
        if self.name == "text":
            return [Copy(0, 0, (v * TEXT_PX_PER_S // US) % self.period, w, h, 0, 0)]
        if self.name == "slides":
            return [Copy(0, 0, (v // (SLIDE_S * US)) % SLIDES * h, w, h, 0, 0)]
        if self.name == "video":
            x, y, rw, rh = self.region
            return [Copy(0, 0, 0, w, h, 0, 0),
                    Copy(1, (v * VIDEO_PAN[0] // US) % VIDEO_MARGIN, (v * VIDEO_PAN[1] // US) % VIDEO_MARGIN,
                         rw, rh, x, y)]
        k = v * 30 // US
        return [Copy(0, (k * BUSY_STEP[0]) % MARGIN, (k * BUSY_STEP[1]) % MARGIN, w, h, 0, 0)]


def render(content: Content, v: int, frame: int) -> np.ndarray:
    """The screen (h × w, 0x00RRGGBB) the painter drew with timecode value `v` and frame counter
    `frame`: the reference for a decoded frame showing that timecode."""
    out = np.empty((content.height, content.width), np.uint32)
    for c in content.plan(v):
        out[c.dy:c.dy + c.h, c.dx:c.dx + c.w] = content.sources[c.src][c.sy:c.sy + c.h, c.sx:c.sx + c.w]
    ones, zeros = timecode.rects(v, frame)
    for rects, colour in ((ones, 0xFFFFFF), (zeros, 0)):
        for x, y, w, h in rects:
            out[y:y + h, x:x + w] = colour
    return out


def _slide(w: int, h: int, i: int) -> np.ndarray:
    """Slide `i`: a title, bullets of proportional text, a bar chart in colour; white ground."""
    from PIL import Image, ImageDraw, ImageFont
    sans = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
    bold = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"
    img = Image.new("RGB", (w, h), "white")
    d, rng = ImageDraw.Draw(img), random.Random(100 + i)
    s = h / 1080
    d.rectangle((0, 0, w, int(150 * s)), fill=(0x1F, 0x3A, 0x5F))
    d.text((int(300 * s), int(40 * s)), f"Slide {i + 1}: " + " ".join(rng.choice(WORDS) for _ in range(4)).title(),
           fill="white", font=ImageFont.truetype(bold, max(8, int(64 * s))))
    body = ImageFont.truetype(sans, max(6, int(36 * s)))
    for j in range(6):
        y = int((220 + j * 80) * s)
        d.ellipse((int(80 * s), y + int(12 * s), int(100 * s), y + int(32 * s)), fill=(0x1F, 0x3A, 0x5F))
        d.text((int(130 * s), y), " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 8))), fill="black", font=body)
    code = ImageFont.truetype(FONT, max(6, int(24 * s)))
    for j in range(4):
        d.text((int(130 * s), int((740 + j * 34) * s)), f"let x{j} = frame.{rng.choice(WORDS)}({j * 7 + i})",
               fill=(0x40, 0x40, 0x40), font=code)
    x0, base = int(w * 0.62), int(900 * s)
    for j in range(6):
        bh = int(rng.randint(100, 600) * s)
        colour = ((50 + 40 * j) % 256, (200 - 25 * j) % 256, (90 + 60 * i) % 256)
        d.rectangle((x0 + int(j * 100 * s), base - bh, x0 + int((j * 100 + 70) * s), base), fill=colour)
    d.line((x0 - int(10 * s), base, w - int(60 * s), base), fill="black", width=max(1, int(3 * s)))
    rgb = np.asarray(img, dtype=np.uint32)
    return (rgb[:, :, 0] << 16) | (rgb[:, :, 1] << 8) | rgb[:, :, 2]


def _texture(w: int, h: int) -> np.ndarray:
    """A smooth, colourful picture (sums of sinusoids and smoothed noise, seed fixed): what a
    camera pan over a natural scene gives an encoder, unlike text or the busy field."""
    from PIL import Image
    rng = np.random.default_rng(32)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    chans = []
    for c in range(3):
        a = np.zeros((h, w), np.float32)
        for _ in range(6):
            fx, fy, ph = rng.uniform(0.002, 0.03), rng.uniform(0.002, 0.03), rng.uniform(0, 6.28)
            a += np.sin(x * fx + y * fy + ph).astype(np.float32)
        noise = rng.standard_normal((h // 16 + 2, w // 16 + 2)).astype(np.float32)
        a += 1.5 * np.asarray(Image.fromarray(noise, "F").resize((w, h), Image.BICUBIC), np.float32)
        a = (a - a.min()) / (a.max() - a.min()) * 255
        chans.append(np.clip(a, 0, 255).astype(np.uint32))
    return (chans[0] << 16) | (chans[1] << 8) | chans[2]
