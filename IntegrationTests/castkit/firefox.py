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

import asyncio
import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from websockets.asyncio.client import connect

from castkit.confine import Guard, confined
from castkit.chromium import JSError, Page, end_process_group

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


class _Connection:
    def __init__(self, ws):
        self.ws = ws
        self.ids = itertools.count(1)
        self.pending: dict[int, asyncio.Future] = {}
        self.reader = asyncio.create_task(self._read())
        self.closed = False

    async def _read(self):
        try:
            async for raw in self.ws:
                msg = json.loads(raw)
                fut = self.pending.pop(msg.get("id"), None) if "id" in msg else None
                if fut and not fut.done():
                    if msg.get("type") == "error":
                        fut.set_exception(BiDiError(f"{msg.get('error')}: {msg.get('message')}"))
                    else:
                        fut.set_result(msg.get("result", {}))
        except Exception:
            pass
        finally:
            self.closed = True
            for fut in self.pending.values():
                if not fut.done():
                    fut.set_exception(BiDiError("BiDi connection closed"))

    async def send(self, method: str, params: dict, timeout: float = 30.0) -> dict:
        if self.closed:
            raise BiDiError("BiDi connection closed")
        mid = next(self.ids)
        fut = asyncio.get_running_loop().create_future()
        self.pending[mid] = fut
        await self.ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        try:
            return await asyncio.wait_for(fut, timeout)
        finally:
            self.pending.pop(mid, None)


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


class Firefox:
    """A headless Firefox ESR process; use as `async with Firefox() as b:`."""

    def __init__(self, *, hide_mdns: bool = False, startup_timeout: float = 30.0):
        if hide_mdns and not confined():
            raise RuntimeError("Firefox with mDNS host candidates multicasts onto the real network: "
                               "run it in a network namespace (castkit/confine.py), or use hide_mdns=False")
        self.hide_mdns = hide_mdns
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen | None = None
        self.profile: str | None = None
        self.conn: _Connection | None = None
        self._ws = None
        self.log_path: Path | None = None
        self.guard: Guard | None = None
        self.version: str | None = None

    def _write_prefs(self) -> None:
        prefs = dict(PREFS)
        # Firefox hides host addresses behind mDNS names unless told not to (or unless the page
        # holds a camera/microphone grant).
        prefs["media.peerconnection.ice.obfuscate_host_addresses"] = self.hide_mdns
        lines = [f"user_pref({json.dumps(k)}, {json.dumps(v)});" for k, v in prefs.items()]
        (Path(self.profile) / "user.js").write_text("\n".join(lines) + "\n")

    async def start(self) -> "Firefox":
        self.profile = tempfile.mkdtemp(prefix="castd-firefox-")
        self._write_prefs()
        self.log_path = Path(self.profile).with_suffix(".log")
        if not confined() and os.geteuid() == 0:
            self.guard = Guard()
        log = open(self.log_path, "wb")
        env = dict(os.environ, MOZ_CRASHREPORTER_DISABLE="1")
        self.proc = subprocess.Popen(
            [FIREFOX, "--headless", "--no-remote", "--profile", self.profile, "--remote-debugging-port", "0",
             "about:blank"], stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
            start_new_session=True, preexec_fn=self.guard.join if self.guard else None)
        log.close()
        deadline = time.monotonic() + self.startup_timeout
        url = None
        while url is None:
            m = re.search(rb"WebDriver BiDi listening on (ws://[0-9.:]+)", self.log_path.read_bytes())
            if m:
                url = m.group(1).decode()
                break
            if self.proc.poll() is not None:
                raise BiDiError(f"firefox exited with {self.proc.returncode}: {self.log_tail()}")
            if time.monotonic() > deadline:
                await self.close()
                raise BiDiError(f"firefox announced no BiDi port in {self.startup_timeout}s: {self.log_tail()}")
            await asyncio.sleep(0.1)
        self._ws = await connect(url + "/session", max_size=None, ping_interval=None)
        self.conn = _Connection(self._ws)
        res = await self.conn.send("session.new", {"capabilities": {}})
        self.version = res.get("capabilities", {}).get("browserVersion")
        return self

    def log_tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_bytes()[-n:].decode(errors="replace") if self.log_path else ""
        except OSError:
            return ""

    async def new_page(self, url: str | None = None) -> FirefoxPage:
        assert self.conn
        res = await self.conn.send("browsingContext.create", {"type": "tab"})
        page = FirefoxPage(self.conn, res["context"])
        await self.conn.send("browsingContext.setViewport",
                             {"context": page.context, "viewport": {"width": 1280, "height": 800}})
        if url:
            await page.goto(url)
        return page

    async def close(self) -> None:
        if self.conn and not self.conn.closed:
            try:
                await self.conn.send("browser.close", {}, timeout=5)
            except (BiDiError, asyncio.TimeoutError):
                pass
        if self._ws is not None:
            try:
                await self._ws.close()
            except Exception:
                pass
        if self.conn:
            self.conn.reader.cancel()
        if self.proc:
            await end_process_group(self.proc)
        if self.guard:
            self.guard.close()
            self.guard = None
        if self.profile:
            shutil.rmtree(self.profile, ignore_errors=True)
            if self.log_path:
                self.log_path.unlink(missing_ok=True)
        self.conn = None

    async def __aenter__(self) -> "Firefox":
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.close()
