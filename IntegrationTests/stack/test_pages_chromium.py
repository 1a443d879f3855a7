"""The headless-Chromium tool itself (castkit/chromium.py), against a loopback page.

Needs no stack: a tiny aiohttp server on 127.0.0.1 serves the page.
"""
import asyncio
import os
import struct

import pytest
from aiohttp import web

from castkit.chromium import Chromium, JSError

PAGE = """<!doctype html><html><body style="margin:0;background:rgb(10,200,30)">
<button id="b" onclick="window.clicked = (window.clicked || 0) + 1">b</button>
<script>console.log("hello from page", 42); console.warn("careful");</script>
</body></html>"""


async def serve():
    app = web.Application()
    async def index(_request):
        return web.Response(text=PAGE, content_type="text/html")

    app.router.add_get("/", index)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    return runner, f"http://127.0.0.1:{port}/"


@pytest.mark.asyncio
async def test_chromium_evaluates_clicks_screenshots_and_leaves_nothing_behind(tmp_path):
    runner, url = await serve()
    browser = Chromium(window_size=(640, 480))
    try:
        await browser.start()
        page = await browser.new_page(url)
        # Promises are awaited and values come back by value.
        assert await page.evaluate("new Promise(r => setTimeout(() => r({a: [1, 2], s: 'x'}), 50))") == {"a": [1, 2], "s": "x"}
        await page.click("#b")
        await page.click("#b")
        assert await page.evaluate("window.clicked") == 2
        with pytest.raises(JSError, match="boom"):
            await page.evaluate("(() => { throw new Error('boom') })()")
        with pytest.raises(TimeoutError):
            await page.wait_for("window.never", timeout=0.5)
        texts = [str(m) for m in page.console]
        assert "[log] hello from page 42" in texts
        assert "[warning] careful" in texts
        png = await page.screenshot(tmp_path / "shot.png")
        data = png.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = struct.unpack(">II", data[16:24])
        assert (width, height) == (640, 480)
        profile = browser.profile
        assert browser.group_alive()
    finally:
        await browser.close()
        await runner.cleanup()
    assert not browser.group_alive()
    assert not os.path.exists(profile)
    # As root the browser ran in a watched cgroup: not one packet left through a non-loopback
    # interface (no DNS look-ups of Google's hosts, no multicast).
    assert browser.off_machine == (0 if os.geteuid() == 0 else None)


def test_hiding_addresses_behind_mdns_is_refused_outside_a_confined_run():
    # Chromium would announce its <uuid>.local names on the real network.
    with pytest.raises(RuntimeError, match="network namespace"):
        Chromium(hide_mdns=True)
