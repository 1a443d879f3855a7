"""The receiver of Scripts/bench --bottleneck: the stack's receiver pages (/dashboard,
/viewer/<id>) in headless Chromium, as a process of its own that the bench starts with
`ip netns exec <receiver namespace>`, so the browser and its media sockets sit behind the
bottleneck. Driven by JSON lines on stdin, one answer line each on stdout:

  {"cmd":"create"}                 opens /dashboard (a new session) → {"sessionId", "pin"}
  {"cmd":"approve", "prefs":{…}}   approves the join request, opens /viewer/<id> → {"ok"}
  {"cmd":"report"}                 what the viewer saw since the last report:
      "frames":   [[t, bytes|null], …] one per frame the <video> presented (t in
                  time.monotonic seconds; bytes: the 6 bytes of the on-glass timecode read
                  from that frame, castkit/bottleneck_metrics.decode_timecode turns them into
                  the drawn time, null when the code was unreadable)
      "stats":    [{…}, …] the viewer page's getStats summaries (window.castdViewer.stats,
                  one a second), each with "t" in time.monotonic seconds
  {"cmd":"close"}                  closes both pages (the next create starts afresh)
  {"cmd":"quit"}

config (argv[1], JSON): {"api_url": the stack's URL as its config.js names it,
"forward_to": the address of the stack's namespace}. 127.0.0.1:<port> here is a forwarder to
forward_to:<port> (faults/chromium_proc.forward), so the pages' signaling crosses the link too.
"""
from __future__ import annotations

import asyncio
import json
import sys

from castkit.chromium_proc import Clock, PagesProcess

# The timecode's geometry (IntegrationTests/castkit/bench/timecode.py): 8 × 6 cells of 32 screen pixels in
# the top-left corner, bit i in cell i, row-major. The hook reads the luma of the middle of
# each cell from every presented frame and hands the 48 bits back as 6 bytes, LSB first.
HOOK = """(() => {
  const video = document.getElementById('video');
  const COLS = 8, ROWS = 6, CELL = 32;
  const canvas = document.createElement('canvas');
  const g = canvas.getContext('2d', { willReadFrequently: true });
  window.__bn = { frames: [], stats: [], lastAt: 0 };
  const read = () => {
    const vw = video.videoWidth, vh = video.videoHeight;
    if (!vw || !vh) return null;
    const s = vw / 1920;                 // the code is drawn at 1080p screen scale
    const c = CELL * s, w = Math.ceil(COLS * c), h = Math.ceil(ROWS * c);
    if (canvas.width !== w || canvas.height !== h) { canvas.width = w; canvas.height = h; }
    g.drawImage(video, 0, 0, w, h, 0, 0, w, h);
    const px = g.getImageData(0, 0, w, h).data;
    const r = Math.max(1, Math.floor(c / 4));
    const bytes = [0, 0, 0, 0, 0, 0];
    for (let i = 0; i < COLS * ROWS; i++) {
      const row = Math.floor(i / COLS), col = i % COLS;
      const cx = Math.floor((col + 0.5) * c), cy = Math.floor((row + 0.5) * c);
      let sum = 0, n = 0;
      for (let y = cy - r; y < cy + r; y++) for (let x = cx - r; x < cx + r; x++) {
        const o = (y * w + x) * 4;
        sum += 0.299 * px[o] + 0.587 * px[o + 1] + 0.114 * px[o + 2]; n++;
      }
      if (n && sum / n >= 126) bytes[i >> 3] |= 1 << (i & 7);
    }
    return bytes;
  };
  const onFrame = (now, meta) => {
    let code = null;
    try { code = read(); } catch (e) { code = null; }
    window.__bn.frames.push([now, code]);
    video.requestVideoFrameCallback(onFrame);
  };
  video.requestVideoFrameCallback(onFrame);
  setInterval(() => {
    const s = window.castdViewer.stats;
    if (s && s.at !== window.__bn.lastAt) {
      window.__bn.lastAt = s.at;
      window.__bn.stats.push({ ...s, perfNow: performance.now() - (Date.now() - s.at) });
    }
  }, 250);
  return true;
})()"""

TAKE = """(() => {
  const b = window.__bn || { frames: [], stats: [] };
  const out = { frames: b.frames, stats: b.stats, state: window.castdViewer?.state ?? null };
  b.frames = []; b.stats = [];
  return out;
})()"""


async def main() -> None:
    rp = PagesProcess(json.loads(sys.argv[1]), errors=(Exception,), console_lines=50)

    async def close_pages() -> None:
        for p in (rp.viewer, rp.dash):
            if p:
                await p.page.close()
        rp.dash = rp.viewer = None

    async def handle(cmd: str, msg: dict) -> bool:
        # Any failure is answered: the bench reports it and goes on with the next run.
        viewer = rp.viewer
        if cmd == "create":
            rp.log_consoles()
            await close_pages()
            await rp.create()
        elif cmd == "approve":
            viewer = await rp.approve(msg, timeout=60, no_ice_servers=True, codec=msg.get("codec"))
            rp.clock = Clock()        # each page has its own performance.timeOrigin
            await viewer.page.evaluate(HOOK)
            await rp.clock.sync(viewer.page)
            rp.out({"ok": True})
        elif cmd == "report":
            got = await viewer.page.evaluate(TAKE, timeout=60) if viewer else {"frames": [], "stats": []}
            if viewer:
                await rp.clock.sync(viewer.page)
            rp.out({"frames": [[rp.clock(t), code] for t, code in got["frames"]],
                    "stats": [{**s, "t": rp.clock(s.pop("perfNow"))} for s in got["stats"]],
                    "state": got.get("state"), "clock_rtt_ms": round(rp.clock.rtt * 1000, 2)})
        elif cmd == "close":
            rp.log_consoles()
            await close_pages()
            rp.out({"ok": True})
        else:
            return False
        return True

    # Stats arrive once a second for minutes: stdin lines stay short, but answers are long.
    await rp.run(handle, stdin_limit=1 << 24, before_close=close_pages)


if __name__ == "__main__":
    asyncio.run(main())
