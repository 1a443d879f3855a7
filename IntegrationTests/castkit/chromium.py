"""Headless Chromium (Debian's `chromium`) driven over the DevTools protocol.

Starts the browser in its own process group with a throw-away profile, reads
the DevTools WebSocket address from `DevToolsActivePort` in that profile, and
speaks a minimal CDP over one browser-level WebSocket with flattened target
sessions. Enough for the receiver-page tests: open a page, evaluate
JavaScript (awaiting promises, values returned by value), click, take PNG
screenshots, collect console output, and close without leftovers.

    async with Chromium() as browser:
        page = await browser.new_page("http://127.0.0.1:8080/dashboard")
        pin = await page.wait_for("window.castdDashboard?.pin", timeout=10)
        await page.screenshot("dashboard.png")
"""
from __future__ import annotations

import asyncio
import base64
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.asyncio.client import connect

from castkit.browser_proc import BrowserProcess, Connection

CHROMIUM = os.environ.get("CASTD_CHROMIUM", "chromium")


class CDPError(RuntimeError):
    pass


class JSError(RuntimeError):
    """A JavaScript exception raised by Page.evaluate."""


@dataclass
class ConsoleMessage:
    level: str
    text: str

    def __str__(self) -> str:
        return f"[{self.level}] {self.text}"


class _Connection(Connection):
    """One WebSocket to the browser target; commands by id, events by session."""

    error = CDPError
    name = "DevTools connection"

    def __init__(self, ws):
        self.listeners: dict[str | None, list] = {}
        super().__init__(ws)

    def error_of(self, msg: dict) -> Exception | None:
        if "error" in msg:
            return CDPError(f"{msg['error'].get('message')} ({msg['error'].get('code')})")
        return None

    def event(self, msg: dict) -> None:
        for fn in self.listeners.get(msg.get("sessionId"), []):
            fn(msg["method"], msg.get("params", {}))

    async def send(self, method: str, params: dict | None = None, session: str | None = None,
                   timeout: float = 30.0) -> dict:
        msg: dict[str, Any] = {"method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        return await self.command(msg, timeout)

    def on(self, session: str | None, fn):
        self.listeners.setdefault(session, []).append(fn)


@dataclass
class Page:
    conn: _Connection
    target_id: str
    session: str
    console: list[ConsoleMessage] = field(default_factory=list)
    _load: asyncio.Event = field(default_factory=asyncio.Event)

    def _event(self, method: str, params: dict):
        if method == "Runtime.consoleAPICalled":
            parts = []
            for a in params.get("args", []):
                if "value" in a:
                    parts.append(a["value"] if isinstance(a["value"], str) else json.dumps(a["value"]))
                else:
                    parts.append(a.get("description", a.get("type", "")))
            self.console.append(ConsoleMessage(params.get("type", "log"), " ".join(map(str, parts))))
        elif method == "Runtime.exceptionThrown":
            d = params.get("exceptionDetails", {})
            text = d.get("exception", {}).get("description") or d.get("text", "exception")
            self.console.append(ConsoleMessage("exception", text))
        elif method == "Log.entryAdded":
            e = params.get("entry", {})
            self.console.append(ConsoleMessage(e.get("level", "log"), f"{e.get('text', '')} {e.get('url', '')}".strip()))
        elif method == "Page.loadEventFired":
            self._load.set()

    async def send(self, method: str, params: dict | None = None, timeout: float = 30.0) -> dict:
        return await self.conn.send(method, params, self.session, timeout)

    async def goto(self, url: str, timeout: float = 20.0) -> None:
        self._load.clear()
        res = await self.send("Page.navigate", {"url": url}, timeout)
        if res.get("errorText"):
            raise CDPError(f"navigation to {url} failed: {res['errorText']}")
        await asyncio.wait_for(self._load.wait(), timeout)

    async def evaluate(self, expression: str, timeout: float = 30.0) -> Any:
        """Evaluates an expression (awaiting a returned promise) and returns its JSON value."""
        res = await self.send("Runtime.evaluate", {
            "expression": expression, "awaitPromise": True, "returnByValue": True,
            "userGesture": True,
        }, timeout)
        if "exceptionDetails" in res:
            d = res["exceptionDetails"]
            raise JSError(d.get("exception", {}).get("description") or d.get("text", "JavaScript error"))
        return res.get("result", {}).get("value")

    async def wait_for(self, expression: str, timeout: float = 10.0, interval: float = 0.2) -> Any:
        """Polls until the expression is truthy; returns its value. Raises TimeoutError with the last value."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while True:
            try:
                last = await self.evaluate(expression)
            except JSError as e:
                last = f"JSError: {e}"
            else:
                if last:
                    return last
            if time.monotonic() >= deadline:
                raise TimeoutError(f"timed out after {timeout}s waiting for {expression!r}; last value {last!r}")
            await asyncio.sleep(interval)

    async def click(self, selector: str) -> None:
        ok = await self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return false; e.click(); return true; }})()")
        if not ok:
            raise CDPError(f"no element matches {selector}")

    async def text(self, selector: str) -> str | None:
        return await self.evaluate(f"document.querySelector({json.dumps(selector)})?.textContent ?? null")

    async def screenshot(self, path: str | os.PathLike, full_page: bool = False) -> Path:
        """A PNG of the viewport, or of the whole page when full_page is set."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            m = await self.send("Page.getLayoutMetrics")
            size = m.get("cssContentSize") or m["contentSize"]
            params |= {"captureBeyondViewport": True,
                       "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}}
        res = await self.send("Page.captureScreenshot", params)
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(base64.b64decode(res["data"]))
        return p

    async def close(self) -> None:
        try:
            await self.conn.send("Target.closeTarget", {"targetId": self.target_id}, timeout=5)
        except CDPError:
            pass


class Chromium(BrowserProcess):
    """A headless Chromium process; use as `async with Chromium() as b:`.

    By default WebRTC host candidates carry the machine's addresses and Chromium sends no
    multicast at all; `hide_mdns=True` is Chrome's default (mDNS names, castkit/browser_proc.py).
    As root outside a test namespace, `assert_stayed_on_the_machine()` after `close` fails
    when the browser sent a packet through a non-loopback interface."""

    name = "Chromium"
    error = CDPError

    def __init__(self, *, hide_mdns: bool = False, extra_args: list[str] | None = None,
                 window_size: tuple[int, int] = (1280, 800), startup_timeout: float = 20.0):
        super().__init__(hide_mdns=hide_mdns, startup_timeout=startup_timeout)
        self.extra_args = list(extra_args or [])
        self.window_size = window_size

    def args(self) -> list[str]:
        a = [
            CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
            "--autoplay-policy=no-user-gesture-required",
            "--remote-debugging-port=0", f"--user-data-dir={self.profile}",
            f"--window-size={self.window_size[0]},{self.window_size[1]}",
            "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-extensions",
            "--disable-default-apps", "--metrics-recording-only", "--password-store=basic",
            # Without this, chrome_crashpad_handler daemons start in their own
            # sessions, escape the process group and outlive the browser.
            "--disable-breakpad",
            # Names resolve to nothing but localhost: without this Chromium looks up
            # accounts.google.com, clients2.google.com and update.googleapis.com through the
            # machine's DNS server even with the flags above (seen in a network namespace).
            # Tests use 127.0.0.1 URLs, which stay literal.
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
        ]
        if not self.hide_mdns:
            # The flag that matters is the second: it grants camera/microphone, and a page with
            # that permission gets host candidates with real addresses and no mDNS. (Measured in a
            # network namespace with Debian's Chromium 13x on a page gathering candidates: the
            # feature switch alone gives no host candidate and no mDNS; the permission alone, or
            # both, give the veth's address and not one multicast packet; neither flag gives
            # mDNS announcements on 224.0.0.251.)
            a.append("--disable-features=WebRtcHideLocalIpsWithMdns")
            a.append("--use-fake-ui-for-media-stream")
        return a + self.extra_args + ["about:blank"]

    async def start(self) -> "Chromium":
        self._spawn(self.args)
        port_file = Path(self.profile) / "DevToolsActivePort"

        def devtools_address() -> str | None:
            lines = port_file.read_text().splitlines() if port_file.exists() else []
            return f"ws://127.0.0.1:{lines[0].strip()}{lines[1].strip()}" if len(lines) >= 2 else None

        url = await self._announced(devtools_address, "wrote no DevToolsActivePort")
        self._ws = await connect(url, max_size=None, ping_interval=None)
        self.conn = _Connection(self._ws)
        return self

    async def new_page(self, url: str | None = None) -> Page:
        assert self.conn
        t = await self.conn.send("Target.createTarget", {"url": "about:blank"})
        a = await self.conn.send("Target.attachToTarget", {"targetId": t["targetId"], "flatten": True})
        page = Page(self.conn, t["targetId"], a["sessionId"])
        self.conn.on(page.session, page._event)
        for domain in ("Page", "Runtime", "Log"):
            await page.send(f"{domain}.enable")
        # A fixed viewport, so screenshots and layouts are the same on every machine.
        w, h = self.window_size
        await page.send("Emulation.setDeviceMetricsOverride",
                        {"width": w, "height": h, "deviceScaleFactor": 1, "mobile": False})
        if url:
            await page.goto(url)
        return page

    async def _ask_to_quit(self) -> None:
        await self.conn.send("Browser.close", timeout=5)
