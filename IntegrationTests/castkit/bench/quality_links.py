"""Scripts/bench --quality --link …: the quality table per content × link (issue 32), every
sender through the same real bottleneck to the same receiver, in one run.

    Scripts/bench --quality --link free --link 4000 --link 2000 --link 1000 \\
        [--content text|slides|video|busy]... [--sender castd|gstreamer|libwebrtc-detail|libwebrtc]...

Topology (root only; castkit/bottleneck_link.py, as Scripts/bench --bottleneck):

    namespace "s" (senders)                               namespace "r" (receiver)
    the local stack, Xvfb + the bench painter drawing     the bench's aiortc receiver
    the content (content.py); castd; the GStreamer        (round_rx.py), which keeps the
    sender; headless Chromium drawing the same content    decoded luma of a frame per
    on a canvas (canvas_content.py) and sending it with   --quality-every seconds
    its own libwebrtc (canvas_sender.py)
         10.79.n.1 veth ── tbf on this egress (rate R, 200 ms queue) ──▶ veth 10.79.n.2

Per content, per link, per round, each sender in turn (the order reversed every other
round): the round of the other quality rows (bench.run_round: pair, approve, warm up, measure),
its kept lumas compared after the round with content.render of their timecodes (SSIM and
PSNR on luma, quality.py). Senders: castd (its defaults: H.264 Constrained Baseline, its rate
control); GStreamer's x264enc with castd's settings through webrtcbin (gst_sender.py, no rate
control: a fixed 4 Mbit/s); Chromium's libwebrtc with contentHint "detail" (what Chrome's screen
sharing sets) and "motion", H.264 Constrained Baseline first, maxBitrate 4 Mbit/s,
maintain-resolution. Chromium paints its own canvas, so the X painter is paused while it runs.

Writes artifacts/bench/quality-links.json and quality-links-<content>.png (PSNR-Y over time per
sender and link), prints the table. A benchmark: it reports figures and never fails on them.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path
from types import SimpleNamespace

from castkit.bench import content as contents
from castkit.bench.stats import quantile

SENDERS = ("castd", "castd-before", "gstreamer", "libwebrtc-detail", "libwebrtc")
HINTS = {"libwebrtc": "motion", "libwebrtc-detail": "detail"}
LINKS = ("free", "4000", "2000", "1000")


def log(msg: str) -> None:
    print(f"bench --quality --link: {msg}", file=sys.stderr, flush=True)


def link_kbit(name: str) -> int | None:
    return None if name == "free" else int(name)


def link_label(name: str) -> str:
    return "free" if name == "free" else f"{int(name) / 1000:g} Mbit/s"


class CanvasSenderProc:
    """Chromium's own sender in the shape of bench.SenderProc: a page of the run's Chromium draws
    the content on a canvas, its RTCPeerConnection sends it; the signaling is RefSender's."""

    def __init__(self, kind: str, stack, browser, page_url: str, content: contents.Content, screen,
                 painter_fps: float, codec: str = "h264"):
        self.kind, self.stack, self.browser, self.page_url, self.content = kind, stack, browser, page_url, content
        self.codec = codec
        self.screen, self.painter_fps = screen, painter_fps
        self.page = self.client = self.sender = self.task = None
        self.main = SimpleNamespace(returncode=None)
        self.out: list[str] = []

    @property
    def err(self) -> list[str]:
        return [f"{t:.3f} {n} {f}" for t, n, f in (self.sender.events if self.sender else [])]

    async def start(self, pin: str, session_id: str) -> int:
        from castkit.bench import canvas_content
        from castkit.canvas_sender import CanvasSender, map_clock, page_js
        from castkit.signaling import StackClient, StackConfig
        self.screen.painter.send_signal(signal.SIGSTOP)     # Chromium paints its own picture
        self.page = await self.browser.new_page(self.page_url)    # canvas_sender.serve_blank_page
        await self.page.evaluate(page_js(self.content.width, self.content.height, paint_fps=self.painter_fps),
                                 timeout=60)
        await self.page.evaluate(canvas_content.content_js(self.content), timeout=120)
        await map_clock(self.page)
        self.client = StackClient(StackConfig(self.stack.api_url, self.stack.supabase_url, self.stack.key))
        await self.client.sign_in()
        self.sender = CanvasSender(self.client, self.page, hint=HINTS[self.kind], codec=self.codec)
        await self.sender.pair(pin=pin)

        async def go() -> None:
            await self.sender.wait_approved(timeout=60)
            await self.sender.start()
        self.task = asyncio.create_task(go())
        return self.browser.proc.pid

    async def stop(self) -> None:
        try:
            if self.sender:
                self.out.append(json.dumps(await self.sender.outbound()))
                await self.sender.stop()
            if self.task:
                self.task.cancel()
            if self.client:
                await self.client.close()
            if self.page:
                await self.page.close()
        finally:
            self.screen.painter.send_signal(signal.SIGCONT)

    def castd_stats(self) -> dict:
        return {}


async def run(a) -> dict:
    """The inner run, in the sender namespace (bottleneck.outer puts it there)."""
    from castkit.bench import bench
    from castkit.bench.bench import SenderProc, run_round, summarize
    from castkit.bench.host import machine
    from castkit.bench.round_rx import RemoteReceiver
    from castkit.bench.screen import BenchScreen
    from castkit.bottleneck_link import BottleneckLink
    from castkit.chromium import Chromium
    from castkit.confine import CONFINED_ENV, confined_env_value
    from castkit.devstack import devstack_down, devstack_up
    link = BottleneckLink(os.environ["BN_TAG"])
    os.environ[CONFINED_ENV] = confined_env_value(link.ns_s)
    out_dir = Path(a.out)
    logs = out_dir / "quality-links-logs"
    logs.mkdir(parents=True, exist_ok=True)
    result = {"command": " ".join(["Scripts/bench"] + a.argv),
              "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "config": {"castd": bench.castd_binary(), "castd_before": a.castd_before, "rounds": a.rounds, "seconds_per_round": a.seconds,
                         "warmup_s": a.warmup, "painter_fps": a.painter_fps, "quality_every_s": a.quality_every,
                         "links": list(a.link), "senders": list(a.sender), "prefs": bench.PREFS, "codec": a.codec,
                         "tbf": "rate R burst max(5000 B, 1.25 R/HZ) latency 200ms on the sender's veth egress"},
              "cells": []}
    stack = devstack_up(listen="0.0.0.0", signaling_rate_limit=100000)
    rx = browser = blank = None
    try:
        rx = await RemoteReceiver.start(link.ns_r, stack, link.addr_s, logs / "receiver.log",
                                        accept_high=bool(bench.H264_PROFILE))
        if any(k in HINTS for k in a.sender):
            from castkit.canvas_sender import serve_blank_page
            browser = await Chromium(hide_mdns=False).start()
            page_url, blank = await serve_blank_page()
        for name in a.content:
            c = contents.Content(name, 1920, 1080)
            with BenchScreen(1920, 1080, "static", timecode=True, fps=a.painter_fps, content=name) as screen:
                for ln in a.link:
                    link.set_rate(link_kbit(ln))
                    rounds: dict[str, list[dict]] = {k: [] for k in a.sender}
                    for i in range(a.rounds):
                        for kind in (a.sender if i % 2 == 0 else tuple(reversed(a.sender))):
                            log(f"{name} {link_label(ln)} round {i + 1}/{a.rounds}: {kind}")
                            home = Path(tempfile.mkdtemp(prefix="castd-bench-"))
                            # castd-before: castd's round with another build (--castd-before)
                            proc_kind = "castd" if kind == "castd-before" else kind
                            sender = (CanvasSenderProc(kind, stack, browser, page_url, c, screen, a.painter_fps, a.codec)
                                      if kind in HINTS else
                                      SenderProc(proc_kind, stack, screen, home, a.codec,
                                                 binary=a.castd_before if kind == "castd-before" else None))
                            try:
                                r = await run_round(stack, screen, proc_kind, a.seconds, a.warmup, a.codec, content=c,
                                                    quality_every=a.quality_every, rx=rx, sender=sender)
                                r["sender"] = kind
                                if kind in HINTS and sender.out:
                                    r["libwebrtc_outbound"] = json.loads(sender.out[-1])
                                q = r.get("quality_per_frame") or [[0, 0, 0]]
                                log(f"  {r['fps']} fps, g2g {quantile(r['latencies_ms'], 0.5) if r['latencies_ms'] else None} ms, "
                                    f"{r['mean_bitrate_bps'] / 1e6:.2f} Mbit/s, PSNR-Y mean "
                                    f"{sum(x[2] for x in q) / len(q):.2f} dB over {len(q)} frames")
                            except Exception as e:  # a failed round is reported; the bench goes on
                                log(f"  failed: {type(e).__name__}: {e}")
                                with (logs / "errors.txt").open("a") as f:
                                    f.write(f"--- {name} {ln} {kind}\n{traceback.format_exc()}\n")
                                r = {"sender": kind, "error": f"{type(e).__name__}: {e}"[:2000]}
                            r["round"] = i + 1
                            if proc_kind == "castd":
                                r["log"] = str(logs / f"{name}-{ln}-{i + 1}-{kind}.log")
                                Path(r["log"]).write_text("\n".join(sender.err) + "\n")
                            rounds[kind].append(r)
                    cell = {"content": name, "link": ln, "link_kbit": link_kbit(ln)}
                    for kind, rs in rounds.items():
                        ok = [r for r in rs if "error" not in r]
                        cell[kind] = summarize(ok) if ok else {"error": rs[0].get("error") if rs else "no round"}
                    cell["rounds"] = rounds
                    result["cells"].append(cell)
                    link.set_rate(None)
    finally:
        if browser:
            await browser.close()
        if blank:
            blank.close()
        if rx:
            await rx.quit()
        devstack_down(stack.state_dir)
        link.set_rate(None)
    result["machine"] = machine()
    return result


COLUMNS = ("fps", "g2g median / p95 ms", "Mbit/s", "SSIM mean", "SSIM p5", "PSNR-Y mean dB", "PSNR-Y p5 dB", "frames",
           "freezes / PLIs", "QP")


def table(result: dict) -> str:
    """The result as a Markdown table: a row per content × link × sender."""
    rows = ["| content | link | sender | " + " | ".join(COLUMNS) + " |",
            "|---|---|---|" + "---:|" * len(COLUMNS)]
    for cell in result["cells"]:
        for kind in SENDERS:
            s = cell.get(kind)
            if s is None:
                continue
            head = f"| {cell['content']} | {link_label(cell['link'])} | {kind} |"
            if "error" in s:
                rows.append(head + f" error: {str(s['error'])[:90]} |" + " |" * (len(COLUMNS) - 1))
                continue
            rows.append(head + f" {s['fps']} | {s['glass_to_glass_median_ms']} / {s['glass_to_glass_p95_ms']} "
                        f"| {s['mean_bitrate_bps'] / 1e6:.2f} | {s.get('ssim_mean')} | {s.get('ssim_p5')} "
                        f"| {s.get('psnr_mean_db')} | {s.get('psnr_p5_db')} | {s.get('quality_frames')} "
                        f"| {s.get('freezes')} / {s.get('receiver_plis', 0)} | {s.get('decoder_qp_mean')} |")
    return "\n".join(rows)


def plot(result: dict, out_dir: Path) -> list[str]:
    """quality-links-<content>.png: PSNR-Y of each compared frame over the round, a panel per link,
    a line per sender (its first round)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    files = []
    for name in dict.fromkeys(c["content"] for c in result["cells"]):
        cells = [c for c in result["cells"] if c["content"] == name]
        fig, axes = plt.subplots(1, len(cells), figsize=(4.2 * len(cells), 3.4), sharey=True, squeeze=False)
        for ax, cell in zip(axes[0], cells):
            for kind in SENDERS:
                rs = [r for r in cell["rounds"].get(kind, []) if "quality_per_frame" in r]
                if rs:
                    q = rs[0]["quality_per_frame"]
                    ax.plot([x[0] for x in q], [min(x[2], 60) for x in q], label=kind, linewidth=1)
            ax.set_title(f"{name}, {link_label(cell['link'])}")
            ax.set_xlabel("seconds into the measured window")
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel("PSNR-Y dB (capped at 60)")
        axes[0][-1].legend(fontsize=8)
        fig.tight_layout()
        f = out_dir / f"quality-links-{name}.png"
        fig.savefig(f, dpi=90)
        plt.close(fig)
        files.append(str(f))
    return files


def main(a, argv: list[str]) -> int:
    """From bench.main: the outer run (namespaces, guard) or, with --inner, the run itself."""
    from castkit.bench import bottleneck
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    f = out_dir / "quality-links.json"
    if not a.inner:
        f.unlink(missing_ok=True)
        rc = bottleneck.outer(a, argv, script=str(Path(__file__).with_name("bench.py")), result=f.name)
        if f.exists():
            res = json.loads(f.read_text())
            print(table(res))
            log(f"JSON in {f}; plots {', '.join(res.get('plots', []))}; packets off the machine: "
                f"{res.get('off_machine', {}).get('root_namespace', {}).get('run_any')}")
        return rc
    result = asyncio.run(run(a))
    try:
        result["plots"] = plot(result, out_dir)
    except Exception as e:  # plots are a convenience; the JSON is the result
        log(f"plots failed: {type(e).__name__}: {e}")
    f.write_text(json.dumps(result, indent=1, sort_keys=True))
    return 0
