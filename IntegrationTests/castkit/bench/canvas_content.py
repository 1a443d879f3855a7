"""The quality bench's contents (content.py) on a Chromium canvas, for Chromium's own sender
(castkit/canvas_sender.py) in the quality rows: the same source pictures, handed to the page
as PNG, and the same copy plan, in JavaScript. The page draws each frame as the X painter
does (the plan's copies for the time value v, then the timecode), so the reference that
`content.render` makes from a decoded frame's timecode is the canvas's picture exactly:
drawImage of an ImageBitmap decoded without colour conversion, at whole-pixel offsets and
unscaled, copies pixels. `IntegrationTests/bench/test_quality_canvas.py` reads a painted
canvas back and checks it equals `render` pixel for pixel.

    await page.evaluate(canvas_sender.page_js(...))
    await page.evaluate(canvas_content.content_js(Content("slides", 1920, 1080)), timeout=120)
"""
from __future__ import annotations

import base64
import io
import json

import numpy as np

from castkit.bench import content as contents
from castkit.bench.painter import MARGIN

PLAN_JS = """(async () => {
  const P = %(params)s;
  const load = async (url) => {
    const img = new Image();
    img.src = url;
    await img.decode();
    return await createImageBitmap(img, { colorSpaceConversion: 'none', premultiplyAlpha: 'none' });
  };
  const src = await Promise.all(%(urls)s.map(load));
  const US = 1000000, W = P.width, H = P.height;
  // content.Content.plan, copy for copy: [source, sx, sy, w, h, dx, dy]
  const plan = (v) => {
    if (P.name === 'text') return [[0, 0, Math.floor(v * P.text_px_per_s / US) %% P.period, W, H, 0, 0]];
    if (P.name === 'slides') return [[0, 0, Math.floor(v / (P.slide_s * US)) %% P.slides * H, W, H, 0, 0]];
    if (P.name === 'video') {
      const [x, y, rw, rh] = P.region;
      return [[0, 0, 0, W, H, 0, 0],
              [1, Math.floor(v * P.video_pan[0] / US) %% P.video_margin,
                  Math.floor(v * P.video_pan[1] / US) %% P.video_margin, rw, rh, x, y]];
    }
    const k = Math.floor(v * 30 / US);
    return [[0, (k * P.busy_step[0]) %% P.margin, (k * P.busy_step[1]) %% P.margin, W, H, 0, 0]];
  };
  window.__content = {
    name: P.name, plan,
    draw: (g, v) => { for (const [s, sx, sy, w, h, dx, dy] of plan(v)) g.drawImage(src[s], sx, sy, w, h, dx, dy, w, h); },
  };
  return true;
})()"""


def png_url(pixels: np.ndarray) -> str:
    """0x00RRGGBB pixels (uint32) as a PNG data URL (no gamma or colour chunks: sRGB as is)."""
    from PIL import Image
    rgb = np.stack([(pixels >> 16) & 0xFF, (pixels >> 8) & 0xFF, pixels & 0xFF], axis=-1).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(rgb, "RGB").save(buf, format="PNG", compress_level=1)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def content_js(c: contents.Content) -> str:
    """JavaScript that sets window.__content for the page of canvas_sender.page_js (resolves
    true once the source pictures are decoded)."""
    params = {"name": c.name, "width": c.width, "height": c.height, "text_px_per_s": contents.TEXT_PX_PER_S,
              "period": getattr(c, "period", 1), "slide_s": contents.SLIDE_S, "slides": contents.SLIDES,
              "region": list(getattr(c, "region", (0, 0, 0, 0))), "video_pan": list(contents.VIDEO_PAN),
              "video_margin": contents.VIDEO_MARGIN, "busy_step": list(contents.BUSY_STEP), "margin": MARGIN}
    return PLAN_JS % {"params": json.dumps(params), "urls": json.dumps([png_url(s) for s in c.sources])}


def canvas_rgb(b64: str, width: int, height: int) -> np.ndarray:
    """canvas_sender's `pixels()` (base64 RGBA) → 0x00RRGGBB (uint32), as content.render gives."""
    a = np.frombuffer(base64.b64decode(b64), np.uint8).reshape(height, width, 4).astype(np.uint32)
    return (a[..., 0] << 16) | (a[..., 1] << 8) | a[..., 2]
