"""Headless Firefox ESR (Debian's `firefox-esr`) driven over its built-in WebDriver BiDi.

No geckodriver: Firefox started with `--remote-debugging-port 0` prints
`WebDriver BiDi listening on ws://127.0.0.1:<port>` and serves BiDi at `/session` there.
Pages offer what the receiver-page helpers (castkit/receiver_pages.py) use of a Chromium
`Page`: goto, evaluate (a promise is awaited; the value comes back through JSON), wait_for,
click and text, so `Viewer.open(firefox, …)` drives /viewer/<id> in Firefox.

A throw-away profile whose prefs switch off updates, telemetry and the other background
connections, and let media autoplay. With `hide_mdns=False` (the default) Firefox's host
candidates carry addresses; `hide_mdns=True` is Firefox's default (`<uuid>.local` names it
announces by multicast), which is refused outside a network namespace of the test's own
(castkit/confine.py), as for Chromium.

    async with Firefox() as browser:
        page = await browser.new_page("http://127.0.0.1:8080/viewer/…")
        print(await page.evaluate("navigator.userAgent"))
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from websockets.asyncio.client import connect

from castkit.browser_proc import BrowserProcess, Connection
from castkit.chromium import JSError, Page

FIREFOX = os.environ.get("CASTD_FIREFOX", "firefox-esr")

PREFS = {
    "media.autoplay.default": 0,
    "media.autoplay.blocking_policy": 0,
    "app.update.auto": False,
    "app.update.enabled": False,
    "app.normandy.enabled": False,
    "browser.shell.checkDefaultBrowser": False,
    "browser.startup.homepage_override.mstone": "ignore",
    "browser.safebrowsing.malware.enabled": False,
    "browser.safebrowsing.phishing.enabled": False,
    "browser.safebrowsing.downloads.enabled": False,
    "browser.safebrowsing.provider.mozilla.updateURL": "",
    "browser.search.update": False,
    "datareporting.policy.dataSubmissionEnabled": False,
    "datareporting.healthreport.uploadEnabled": False,
    "toolkit.telemetry.enabled": False,
    "toolkit.telemetry.unified": False,
    "network.captive-portal-service.enabled": False,
    "network.connectivity-service.enabled": False,
    "network.dns.disablePrefetch": True,
    "network.prefetch-next": False,
    "extensions.update.enabled": False,
    "extensions.blocklist.enabled": False,
    "services.settings.server": "http://127.0.0.1:9/",
    "media.gmp-manager.url": "http://127.0.0.1:9/",
    "media.gmp-gmpopenh264.enabled": False,
    "dom.push.connection.enabled": False,
    "remote.prefs.recommended": True,
}


class BiDiError(RuntimeError):
    pass


class _Connection(Connection):
    error = BiDiError
    name = "BiDi connection"

    def error_of(self, msg: dict) -> Exception | None:
        if msg.get("type") == "error":
            return BiDiError(f"{msg.get('error')}: {msg.get('message')}")
        return None

    async def send(self, method: str, params: dict, timeout: float = 30.0) -> dict:
        return await self.command({"method": method, "params": params}, timeout)


@dataclass
class FirefoxPage:
    conn: _Connection
    context: str

    async def goto(self, url: str, timeout: float = 20.0) -> None:
        await self.conn.send("browsingContext.navigate", {"context": self.context, "url": url, "wait": "complete"},
                             timeout)

    async def evaluate(self, expression: str, timeout: float = 30.0) -> Any:
        """Evaluates an expression (awaiting a returned promise) and returns its JSON value."""
        wrapped = f"(async () => JSON.stringify(await ({expression})))()"
        res = await self.conn.send("script.evaluate", {
            "expression": wrapped, "target": {"context": self.context}, "awaitPromise": True,
            "userActivation": True}, timeout)
        if res.get("type") == "exception":
            d = res.get("exceptionDetails", {})
            raise JSError(d.get("text") or "JavaScript error")
        r = res.get("result", {})
        return json.loads(r["value"]) if r.get("type") == "string" else None

    # These use nothing of a page but `evaluate`: Chromium's, shared.
    wait_for = Page.wait_for
    click = Page.click
    text = Page.text


class Firefox(BrowserProcess):
    """A headless Firefox ESR process; use as `async with Firefox() as b:`."""

    name = "Firefox"
    error = BiDiError

    def __init__(self, *, hide_mdns: bool = False, startup_timeout: float = 30.0):
        super().__init__(hide_mdns=hide_mdns, startup_timeout=startup_timeout)
        self.version: str | None = None

    def _write_prefs(self) -> None:
        prefs = dict(PREFS)
        # Firefox hides host addresses behind mDNS names unless told not to (or unless the page
        # holds a camera/microphone grant).
        prefs["media.peerconnection.ice.obfuscate_host_addresses"] = self.hide_mdns
        lines = [f"user_pref({json.dumps(k)}, {json.dumps(v)});" for k, v in prefs.items()]
        (Path(self.profile) / "user.js").write_text("\n".join(lines) + "\n")

    async def start(self) -> "Firefox":
        self._spawn(lambda: [FIREFOX, "--headless", "--no-remote", "--profile", self.profile,
                             "--remote-debugging-port", "0", "about:blank"],
                    env=dict(os.environ, MOZ_CRASHREPORTER_DISABLE="1"), prepare=self._write_prefs)

        def bidi_address() -> str | None:
            m = re.search(rb"WebDriver BiDi listening on (ws://[0-9.:]+)", self.log_path.read_bytes())
            return m.group(1).decode() if m else None

        url = await self._announced(bidi_address, "announced no BiDi port")
        self._ws = await connect(url + "/session", max_size=None, ping_interval=None)
        self.conn = _Connection(self._ws)
        res = await self.conn.send("session.new", {"capabilities": {}})
        self.version = res.get("capabilities", {}).get("browserVersion")
        return self

    async def new_page(self, url: str | None = None) -> FirefoxPage:
        assert self.conn
        res = await self.conn.send("browsingContext.create", {"type": "tab"})
        page = FirefoxPage(self.conn, res["context"])
        await self.conn.send("browsingContext.setViewport",
                             {"context": page.context, "viewport": {"width": 1280, "height": 800}})
        if url:
            await page.goto(url)
        return page

    async def _ask_to_quit(self) -> None:
        await self.conn.send("browser.close", {}, timeout=5)
