"""An X client that paints benchmark content on a screen's root window.

    python -m castkit.bench.painter --display :50 --background static|still|busy|text [--timecode] [--fps 60]

static: colour bars over the top two thirds, dark grey below (castd's test
picture). still: the busy field, not moving (ConvertEncodeBench's static
content). busy: a field of random 8×8 blocks (xorshift32, seed 0x12345678,
the same field as ConvertEncodeBench's busy source) scrolled by (9, 5) pixels
every frame, copied from a server-side pixmap so that the painter itself
costs little. text: a page of black monospaced text on white (DejaVu Sans Mono
22 px, random words, as qp_vs_fps.py draws it) scrolling up 120 pixels a second
(4 a frame at 30 fps), seamlessly: a realistic busy screen, not the bench's
noise-like field. --timecode draws the current CLOCK_MONOTONIC time every frame
(see timecode.py). Prints "painter: drawing on WxH" once ready; stops on
SIGTERM.

--content text|slides|video|busy (the quality bench, issue 32; content.py) draws instead
content that is a pure function of the timecode it shows (implies --timecode), so the
bench can redraw the exact source of any decoded frame.
"""
from __future__ import annotations

import argparse
import signal
import sys
import time

import numpy as np
from Xlib import X, display as xdisplay

from castkit.bench import timecode

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"
WORDS = ("the of and to in is for on with as by at from this that castd frame rate bitrate encoder "
         "packet receiver sender screen cast link queue probe estimate").split()
TEXT_LINE = 28        # 22 px glyphs and 6 px between lines
TEXT_SPEED = 120      # pixels a second

BARS = [0xBFBFBF, 0xBFBF00, 0x00BFBF, 0x00BF00, 0xBF00BF, 0xBF0000, 0x0000BF]
MARGIN = 512


def busy_field(width: int, height: int) -> np.ndarray:
    """(h+512) × (w+512) 0x00RRGGBB pixels: random 8×8 blocks (ConvertEncodeBench.BusySource)."""
    fw, fh = width + MARGIN, height + MARGIN
    bw, bh = fw // 8 + 1, fh // 8 + 1
    r = 0x12345678
    blocks = np.empty(bw * bh, dtype=np.uint32)
    for i in range(bw * bh):
        r ^= (r << 13) & 0xFFFFFFFF
        r ^= r >> 17
        r ^= (r << 5) & 0xFFFFFFFF
        blocks[i] = r & 0xFFFFFF
    grid = blocks.reshape(bh, bw)
    return np.ascontiguousarray(grid.repeat(8, axis=0).repeat(8, axis=1)[:fh, :fw])


def text_page(width: int, height: int) -> np.ndarray:
    """A page of text at least `height` tall (whole lines), with its first `height` rows
    repeated under it, so that scrolling it by (n × step) mod page height never jumps."""
    import random

    from PIL import Image, ImageDraw, ImageFont
    page = -(-(height + TEXT_LINE) // TEXT_LINE) * TEXT_LINE
    img = Image.new("RGB", (width, page), "white")
    draw, font, rng = ImageDraw.Draw(img), ImageFont.truetype(FONT, 22), random.Random(7)
    for i in range(page // TEXT_LINE):
        line = f"{i:4d}  " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14)))
        draw.text((40, i * TEXT_LINE + 3), line, fill="black", font=font)
    rgb = np.asarray(img, dtype=np.uint32)
    px = (rgb[:, :, 0] << 16) | (rgb[:, :, 1] << 8) | rgb[:, :, 2]
    return np.ascontiguousarray(np.vstack([px, px[:height]]))


class Painter:
    def __init__(self, name: str | None, background: str, with_timecode: bool, content: str | None = None):
        self.d = xdisplay.Display(name)
        self.screen = self.d.screen()
        self.root = self.screen.root
        self.width, self.height = self.screen.width_in_pixels, self.screen.height_in_pixels
        self.background = background
        self.with_timecode = with_timecode
        self.gc = self.root.create_gc(foreground=0, background=0)
        self.black = self.root.create_gc(foreground=0x000000)
        self.white = self.root.create_gc(foreground=0xFFFFFF)
        self.field = None
        self.page = 0
        self.content = None
        if content:
            from castkit.bench.content import Content
            self.content = Content(content, self.width, self.height)
            self.pixmaps = [self._upload(src) for src in self.content.sources]
            self._hide_pointer()
        elif background in ("busy", "still"):
            self.field = self._upload(busy_field(self.width, self.height))
        elif background == "text":
            pixels = text_page(self.width, self.height)
            self.page = pixels.shape[0] - self.height
            self.field = self._upload(pixels)
        else:
            self._bars()

    def _upload(self, pixels: np.ndarray):
        h, w = pixels.shape
        pm = self.root.create_pixmap(w, h, self.screen.root_depth)
        step = max(1, 200_000 // (w * 4))   # requests under 256 KiB (no BIG-REQUESTS needed)
        for y in range(0, h, step):
            chunk = pixels[y:y + step]
            pm.put_image(self.gc, 0, y, w, chunk.shape[0], X.ZPixmap, self.screen.root_depth, 0, chunk.tobytes())
        self.d.sync()
        return pm

    def _bars(self) -> None:
        top = self.height * 2 // 3
        for i, c in enumerate(BARS):
            x0, x1 = i * self.width // len(BARS), (i + 1) * self.width // len(BARS)
            self.gc.change(foreground=c)
            self.root.fill_rectangle(self.gc, x0, 0, x1 - x0, top)
        self.gc.change(foreground=0x101010)
        self.root.fill_rectangle(self.gc, 0, top, self.width, self.height - top)
        self.d.sync()

    def frame(self, n: int, fps: float = 30) -> None:
        if self.content is not None:
            self._content_frame(n)
            return
        if self.background == "text":
            dy = round(n * TEXT_SPEED / fps) % self.page
            self.root.copy_area(self.gc, self.field, 0, dy, self.width, self.height, 0, 0)
        elif self.field is not None and (n == 0 or self.background == "busy"):
            dx, dy = (n * 9) % MARGIN, (n * 5) % MARGIN
            self.root.copy_area(self.gc, self.field, dx, dy, self.width, self.height, 0, 0)
        if self.with_timecode:
            ones, zeros = timecode.rects(timecode.now_us(), n)
            self.root.poly_fill_rectangle(self.white, ones)
            self.root.poly_fill_rectangle(self.black, zeros)
        self.d.sync()

    def _content_frame(self, n: int) -> None:
        """The content's copies for the time now, then the timecode of that same time (content.render
        makes the same picture from the timecode)."""
        v = timecode.now_us() % timecode.WRAP
        plan = self.content.plan(v)
        # Only the copies that changed since the last frame are made, as an application repaints
        # what changed: a still slide costs the timecode's damage only, so a sender that reads
        # the damage (castd's still-picture refinement) sees a still screen, and a slide change
        # damages the whole screen as before. A copy that is made covers its area completely,
        # so skipping an unchanged one leaves the same pixels as making it again.
        last = getattr(self, "_last_plan", None)
        for i, c in enumerate(plan):
            if last is not None and i < len(last) and last[i] == c:
                continue
            self.root.copy_area(self.gc, self.pixmaps[c.src], c.sx, c.sy, c.w, c.h, c.dx, c.dy)
        self._last_plan = plan
        ones, zeros = timecode.rects(v, n)
        self.root.poly_fill_rectangle(self.white, ones)
        self.root.poly_fill_rectangle(self.black, zeros)
        self.d.sync()

    def _hide_pointer(self) -> None:
        """A blank pointer over the root window. The quality rows compare each decoded frame
        with the content redrawn from its timecode, which has no pointer; both senders draw
        the pointer into their pictures (castd's cursor overlay, ximagesrc show-pointer=true,
        both from XFixes), so an arrow in the middle of the screen cost every compared frame
        about 9 dB of PSNR-Y (a still slide measured 43.3 dB with it, 52.6 without). A blank
        pointer keeps the senders' own pointer paths running and leaves nothing to compare."""
        mask = self.root.create_pixmap(1, 1, 1)
        blank = mask.create_cursor(mask, (0, 0, 0), (0, 0, 0), 0, 0)
        self.root.change_attributes(cursor=blank)
        self.d.sync()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--display")
    ap.add_argument("--background", choices=["static", "still", "busy", "text"], default="static")
    ap.add_argument("--timecode", action="store_true")
    ap.add_argument("--content", choices=["text", "slides", "video", "busy"],
                    help="deterministic content keyed on the timecode (the quality bench)")
    ap.add_argument("--fps", type=float, default=60)
    args = ap.parse_args()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    p = Painter(args.display, args.background, args.timecode, args.content)
    p.frame(0)
    print(f"painter: drawing on {p.width}x{p.height}", flush=True)
    animate = args.timecode or args.content or args.background in ("busy", "text")
    start, n = time.monotonic(), 0
    while not stop:
        n += 1
        due = start + n / args.fps
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        elif delay < -1:            # far behind (a stalled machine): skip ahead, don't burst
            start, n = time.monotonic(), 0
        if animate:
            p.frame(n, args.fps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
