"""The receiver of a fault scenario as the real receiver pages in headless Chromium, as a
process of its own: Scripts/faults starts it with `ip netns exec <receiver namespace>`, so
the browser and its media sockets live there. The same JSON-line commands as
receiver_proc.py (a subset), so Scripts/faults drives either the same way:

  {"cmd":"create"}                   opens /dashboard (which creates the session)
                                     → {"sessionId", "pin"}
  {"cmd":"approve", "prefs":{…}}     waits for the join request, sets the preferences,
                                     approves, then opens /viewer/<id> (no ICE servers: host
                                     candidates only, like the aiortc receiver; with
                                     "stack_ice" in the config, the stack's ice-config, and
                                     with "relay_only" iceTransportPolicy "relay") → {"ok"}
  {"cmd":"report"}                   → "frames": when the <video> presented a new frame
                                     (requestVideoFrameCallback), in time.monotonic seconds;
                                     "presented": the element's presentedFrames count;
                                     "stats": the viewer page's getStats summary
                                     (window.castdViewer.stats); "state"; "rows": the offers
                                     the page answered
  {"cmd":"bars"}                     → {"bars": mean RGB of the 7 bars of the current frame, "size"}
  {"cmd":"quit"}

The pages load config.js from the stack, which names it 127.0.0.1:<port> / localhost:<port>;
in this namespace those are a small TCP forwarder of this process that carries every byte to
the stack at <forward_to>:<port> over the veth. Media goes wherever ICE finds a path (the
faults topology leaves only the impaired TUN link).

The caller puts this process in a run confined by its own guard (Scripts/faults: the
receiver namespace has no route off the machine, and an nftables counter in the machine's
namespace watches every process of the run) and says so with castkit/confine.py's
environment variable, so the browser does not start a guard of its own.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
import time

from castkit.chromium import Chromium
from castkit.receiver_pages import Dashboard, Viewer

# Every frame the <video> element presents, with the page's clock, kept in the page until
# the next report takes them.
FRAME_HOOK = """(() => {
  const video = document.getElementById('video');
  window.__faultFrames = [];
  window.__faultPresented = 0;
  const onFrame = (now, meta) => {
    window.__faultFrames.push(now);
    window.__faultPresented = meta.presentedFrames;
    video.requestVideoFrameCallback(onFrame);
  };
  video.requestVideoFrameCallback(onFrame);
  return true;
})()"""

TAKE = """(() => {
  const f = window.__faultFrames || [];
  window.__faultFrames = [];
  const v = window.castdViewer;
  return {frames: f, presented: window.__faultPresented || 0, state: v.state, stats: v.stats,
          offers: v.events.filter(e => e.event === 'offer').map(e => e.negotiationId)};
})()"""


async def forward(listen_port: int, host: str, port: int) -> list[asyncio.AbstractServer]:
    """127.0.0.1:listen_port (and [::1]) → host:port, byte for byte, both ways."""
    async def pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while data := await r.read(1 << 16):
                w.write(data)
                await w.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                w.close()

    async def client(cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        try:
            ur, uw = await asyncio.open_connection(host, port)
        except OSError:
            cw.close()
            return
        try:
            await asyncio.gather(pipe(cr, uw), pipe(ur, cw))
        except asyncio.CancelledError:      # this process is ending (quit): the connections go with it
            cw.close()
            uw.close()

    servers = [await asyncio.start_server(client, "127.0.0.1", listen_port)]
    if socket.has_ipv6:
        with contextlib.suppress(OSError):            # localhost may resolve to ::1 first
            servers.append(await asyncio.start_server(client, "::1", listen_port))
    return servers


class Clock:
    """The page's performance.now() (ms) → time.monotonic() (s): the offset from the
    evaluation with the shortest round trip so far."""

    def __init__(self):
        self.offset, self.rtt = 0.0, float("inf")

    async def sync(self, page) -> None:
        for _ in range(3):
            t0 = time.monotonic()
            now_ms = await page.evaluate("performance.now()")
            t1 = time.monotonic()
            if t1 - t0 < self.rtt:
                self.rtt, self.offset = t1 - t0, (t0 + t1) / 2 - now_ms / 1000

    def __call__(self, ms: float) -> float:
        return self.offset + ms / 1000


class PagesProcess:
    """The shell of a receiver-pages process (this one and castkit/bottleneck_rx.py): the
    forwarder to the stack, one Chromium, the dashboard and viewer pages, and a loop of JSON
    lines on stdin, each answered by one line on stdout. `handle(cmd, msg)` carries out one
    command and returns False for a command it does not know; an exception of `errors` is
    answered as {"error", "console"} and the loop goes on; "quit" or end of input ends it."""

    def __init__(self, cfg: dict, errors: tuple[type[BaseException], ...], console_lines: int):
        self.cfg = cfg
        self.errors = errors
        self.console_lines = console_lines
        self.browser: Chromium | None = None
        self.dash: Dashboard | None = None
        self.viewer: Viewer | None = None
        self.clock = Clock()

    @staticmethod
    def out(obj: dict) -> None:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    async def create(self) -> None:
        """Opens /dashboard, which creates the session → {"sessionId", "pin"}."""
        self.dash = await Dashboard.open(self.browser, self.cfg["api_url"] + "/dashboard", timeout=30)
        self.out({"sessionId": self.dash.session_id, "pin": self.dash.pin})

    async def approve(self, msg: dict, timeout: float, **viewer_options) -> Viewer:
        """Approves the join request with the command's preferences, then opens /viewer/<id>."""
        p = msg.get("prefs") or {}
        await self.dash.approve(resolution=p.get("resolution"), frame_rate=p.get("frameRate"),
                                auto_quality=p.get("autoQuality"), timeout=timeout)
        self.viewer = await Viewer.open(self.browser, self.cfg["api_url"], self.dash.session_id, **viewer_options)
        return self.viewer

    def log_consoles(self) -> None:
        """The pages' console (the viewer logs its states, offers and errors) into this process's log."""
        for name, p in (("dashboard", self.dash), ("viewer", self.viewer)):
            for m in (p.page.console[-self.console_lines:] if p else []):
                print(f"{name}: {m}", file=sys.stderr)

    async def run(self, handle, stdin_limit: int = 1 << 16, before_close=None) -> None:
        port = int(self.cfg["api_url"].rsplit(":", 1)[1])
        servers = await forward(port, self.cfg["forward_to"], port)
        self.browser = await Chromium(hide_mdns=False).start()
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=stdin_limit)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        try:
            while line := await reader.readline():
                msg = json.loads(line)
                cmd = msg.get("cmd")
                if cmd == "quit":
                    break
                try:
                    if not await handle(cmd, msg):
                        self.out({"error": f"unknown cmd {cmd}"})
                except self.errors as e:
                    page = self.viewer or self.dash
                    console = [str(m) for m in page.page.console[-20:]] if page else []
                    self.out({"error": f"{type(e).__name__}: {e}", "console": console})
        finally:
            self.log_consoles()
            if before_close:
                await before_close()
            await self.browser.close()
            for s in servers:
                s.close()


async def main() -> None:
    rp = PagesProcess(json.loads(sys.argv[1]), console_lines=200,
                      errors=(TimeoutError, asyncio.TimeoutError, RuntimeError, KeyError, AttributeError))
    frames: list[float] = []

    async def handle(cmd: str, msg: dict) -> bool:
        viewer = rp.viewer
        if cmd == "create":
            await rp.create()
        elif cmd == "approve":
            viewer = await rp.approve(msg, timeout=30, no_ice_servers=not rp.cfg.get("stack_ice"),
                                      relay_only=bool(rp.cfg.get("relay_only")))
            await viewer.page.evaluate(FRAME_HOOK)
            await rp.clock.sync(viewer.page)
            rp.out({"ok": True})
        elif cmd == "report":
            got = await viewer.page.evaluate(TAKE) if viewer else {}
            if viewer:
                await rp.clock.sync(viewer.page)
            frames.extend(rp.clock(t) for t in got.get("frames", []))
            rp.out({"frames": frames, "presented": got.get("presented", 0), "state": got.get("state"),
                    "stats": got.get("stats"), "clock_rtt_ms": round(rp.clock.rtt * 1000, 1),
                    "rows": [{"type": "offer", "negotiationId": n} for n in got.get("offers", [])]})
        elif cmd == "bars":     # mean RGB of the middle of the seven bars (as xscreen.bar_colours)
            size = await viewer.page.evaluate("[document.getElementById('video').videoWidth, "
                                              "document.getElementById('video').videoHeight]")
            w, h = size
            bars = []
            for i in range(7):
                x0, x1 = int((i + 0.3) * w / 7), int((i + 0.7) * w / 7)
                m = await viewer.sample(x0, int(h * 0.15), x1 - x0, int(h * 0.35))
                bars.append([round(m["r"]), round(m["g"]), round(m["b"])] if m else None)
            rp.out({"bars": bars, "size": size})
        else:
            return False
        return True

    await rp.run(handle)


if __name__ == "__main__":
    asyncio.run(main())
