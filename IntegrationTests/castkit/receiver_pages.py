"""Driving the receiver pages (/dashboard, /viewer/:id) in headless Chromium.

For any test that needs the Chrome receiver on the other end, castd's own
integration tests included:

    async with Chromium(hide_mdns=False) as browser:
        dash = await Dashboard.open(browser, stack.dashboard)
        # … the sender pairs with dash.pin (castd pair --pin …) …
        await dash.approve(resolution="1080p", frame_rate=30)
        viewer = await Viewer.open(browser, stack.api_url, dash.session_id, grace=2, wait=5)
        stats = await viewer.wait_frames(30)
        rgb = await viewer.sample(100, 100, 16, 16)

All waits raise TimeoutError with the last value seen, so a failing test says
what the page was doing.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import urlencode

from castkit.chromium import Chromium, Page

WAIT = 10.0


@dataclass
class Dashboard:
    page: Page
    pin: str
    session_id: str

    @classmethod
    async def open(cls, browser: Chromium, dashboard_url: str, *, stay: bool = True,
                   timeout: float = WAIT) -> "Dashboard":
        """Opens /dashboard (which creates a session) and waits for its PIN."""
        page = await browser.new_page(dashboard_url + ("?stay=1" if stay else ""))
        pin = await page.wait_for("window.castdDashboard?.pin", timeout=timeout)
        sid = await page.evaluate("window.castdDashboard.sessionId")
        return cls(page, pin, sid)

    async def status(self) -> str:
        return await self.page.evaluate("window.castdDashboard.status")

    async def wait_join_request(self, timeout: float = WAIT) -> str:
        """Waits for a join request; returns its device name."""
        await self.page.wait_for("!!document.querySelector('[data-testid=join-request] [data-testid=approve]')",
                                 timeout=timeout)
        return await self.page.text("[data-testid=join-request] [data-testid=device-name]")

    async def set_prefs(self, resolution: str | None = None, frame_rate: int | None = None,
                        auto_quality: bool | None = None) -> None:
        js = []
        if resolution is not None:
            js.append(f"document.getElementById('pref-resolution').value = {json.dumps(resolution)};")
        if frame_rate is not None:
            js.append(f"document.getElementById('pref-framerate').value = {json.dumps(str(frame_rate))};")
        if auto_quality is not None:
            js.append(f"document.getElementById('pref-auto').checked = {json.dumps(auto_quality)};")
        await self.page.evaluate("(() => {" + "".join(js) + " return true; })()")

    async def approve(self, resolution: str | None = None, frame_rate: int | None = None,
                      auto_quality: bool | None = None, timeout: float = WAIT) -> None:
        """Waits for the join request, sets the preferences, clicks Approve, waits for `connecting`."""
        await self.wait_join_request(timeout)
        await self.set_prefs(resolution, frame_rate, auto_quality)
        await self.page.click("[data-testid=join-request] [data-testid=approve]")
        await self.page.wait_for("window.castdDashboard.status === 'connecting'", timeout=timeout)

    async def deny(self, timeout: float = WAIT) -> None:
        await self.wait_join_request(timeout)
        await self.page.click("[data-testid=join-request] [data-testid=deny]")
        await self.page.wait_for("window.castdDashboard.status === 'expired'", timeout=timeout)


@dataclass
class Viewer:
    page: Page
    session_id: str

    @classmethod
    async def open(cls, browser_or_page: Chromium | Page, api_url: str, session_id: str, *,
                   grace: float | None = None, wait: float | None = None, cycles: int | None = None,
                   no_ice_servers: bool = False, codec: str | None = None,
                   relay_only: bool = False, audio: str | None = None) -> "Viewer":
        """Opens /viewer/<id> in a new page (or navigates an existing one)."""
        q = {k: v for k, v in (("grace", grace), ("wait", wait), ("cycles", cycles)) if v is not None}
        if no_ice_servers:
            q["ice"] = "none"
        if codec:
            q["codec"] = codec
        if relay_only:          # iceTransportPolicy "relay": only TURN candidates
            q["relay"] = "1"
        if audio:               # "reject": stop the audio transceiver (the answer says inactive)
            q["audio"] = audio
        url = f"{api_url.rstrip('/')}/viewer/{session_id}" + (f"?{urlencode(q)}" if q else "")
        if isinstance(browser_or_page, Page):
            page = browser_or_page
            await page.goto(url)
        else:
            page = await browser_or_page.new_page(url)
        await page.wait_for("!!window.castdViewer && window.castdViewer.state !== 'starting'", timeout=WAIT)
        return cls(page, session_id)

    async def state(self) -> str:
        return await self.page.evaluate("window.castdViewer.state")

    async def message(self) -> str:
        return await self.page.evaluate("window.castdViewer.message")

    async def stats(self) -> dict | None:
        return await self.page.evaluate("window.castdViewer.stats")

    async def events(self) -> list[dict]:
        return await self.page.evaluate("window.castdViewer.events")

    async def wait_state(self, state: str, timeout: float = WAIT) -> None:
        await self.page.wait_for(f"window.castdViewer.state === {json.dumps(state)}", timeout=timeout)

    async def wait_frames(self, n: int, timeout: float = WAIT) -> dict:
        """Waits until at least n frames of the current negotiation are decoded; returns the stats."""
        return await self.page.wait_for(
            f"(s => s && s.negotiationId === window.castdViewer.negotiationId && s.framesDecoded >= {int(n)} && s)"
            "(window.castdViewer.stats)", timeout=timeout)

    async def sample(self, x: int, y: int, w: int, h: int) -> dict | None:
        """Mean RGB of a rectangle of the current frame (video pixels): {r, g, b, width, height}."""
        return await self.page.evaluate(f"window.castdViewer.samplePixels({int(x)}, {int(y)}, {int(w)}, {int(h)})")

    async def stop(self, timeout: float = WAIT) -> None:
        await self.page.click("[data-testid=stop]")
        await self.wait_state("stopped", timeout)
