"""Chromium's own sender draws the quality bench's contents on a canvas (castkit/bench/canvas_content.py):
the canvas, read back, must equal content.render of the timecode it shows, pixel for pixel, or
Chromium's rows of the quality table would be measured against the wrong reference. And the
bench's receiver keeps a frame's luma behind a link as it does in process (round_rx's data
round trip)."""
import asyncio

import numpy as np
import pytest

from castkit.bench import canvas_content, content, quality, timecode
from castkit.bench.round_rx import RoundData

W, H = 640, 360


@pytest.mark.parametrize("name", content.CONTENTS)
def test_the_canvas_is_exactly_what_render_redraws(name):
    from castkit.canvas_sender import page_js
    from castkit.chromium import Chromium

    c = content.Content(name, W, H)
    # times that move each content: scroll offsets, each slide, the pan and its wrap, the busy steps
    times = [40_000_000, 40_033_334, 45_000_000, 51_234_567, 63_999_999, 4_000_000_123]

    async def run() -> list[np.ndarray]:
        browser = await Chromium().start()
        try:
            page = await browser.new_page("about:blank")
            await page.evaluate(page_js(width=W, height=H, paint_fps=30, capture_fps=30), timeout=60)
            await page.evaluate("window.__cs.stopPainting()")
            await page.evaluate(canvas_content.content_js(c), timeout=120)
            out = []
            for i, v in enumerate(times):
                await page.evaluate(f"window.__cs.drawFrame({v}, {i}, {i})")
                out.append(canvas_content.canvas_rgb(await page.evaluate("window.__cs.pixels()", timeout=60), W, H))
            return out
        finally:
            await browser.close()

    shots = asyncio.run(run())
    for i, (v, px) in enumerate(zip(times, shots)):
        assert timecode.read_luma(quality.luma709(px), 1.0) == (v % 2**32, i)
        ref = content.render(c, v % 2**32, i)
        assert np.array_equal(px, ref), f"{name} at v={v}: {int((px != ref).sum())} pixels differ"
    # the content moves between these times (not one still picture matched six times)
    assert len({shots[k].tobytes() for k in range(len(shots))}) == len(shots)


def test_round_data_survives_the_trip_from_the_receiver_process():
    from castkit.bench.receiver import Sample
    y = (np.arange(360 * 640) % 251).astype(np.uint8).reshape(360, 640)
    d = RoundData(samples=[Sample(1.5, 1.45, 3, 640, 360, 9000, 1.51), Sample(1.6, None, None, 640, 360, 12000, 1.6)],
                  packets=[(1.4, 1200, 9000)], audio_packets=[], frames_out=[(1.49, 9000)], decodes=[(1.49, 1.5, 0)],
                  audio=[], lumas=[(1.5, 123456, 3, y)], codecs=["H264/90000"], connection_states=["connected"])
    import json
    back = RoundData.from_json(json.loads(json.dumps(d.to_json())), [y.copy()])
    assert back.samples == d.samples and back.packets == d.packets and back.frames_out == d.frames_out
    assert back.lumas[0][:3] == (1.5, 123456, 3) and np.array_equal(back.lumas[0][3], y)
    assert back.codecs == ["H264/90000"] and back.connection_states == ["connected"]
