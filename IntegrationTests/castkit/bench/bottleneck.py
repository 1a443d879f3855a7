"""Scripts/bench --bottleneck: castd and Chromium's own libwebrtc sender through the same real
bottleneck (tc tbf) to the same Chromium receiver, one after the other in one run.

Topology (root only; every address inside namespaces this script creates and deletes):

    namespace "s" (senders)                          namespace "r" (receiver)
    the local stack, Xvfb + the bench painter        headless Chromium: /dashboard, /viewer/<id>
    (busy 1080p, on-glass timecode), castd,           (castkit/bottleneck_rx.py); the pages'
    headless Chromium drawing the same picture        signaling reaches the stack over the link
    on a canvas (castkit/canvas_sender.py)
         10.79.n.1 veth ── tbf on this egress (rate R, 200 ms queue) ──▶ veth 10.79.n.2

Everything (media, RTCP, STUN, signaling) crosses the one veth; only the sender → receiver
direction is shaped (castkit/bottleneck_link.py). Scenarios change tbf's rate at run time
(`tc qdisc change`) and add random loss with nftables. A castkit/confine.py guard counts any
packet of the run that leaves through a real interface (reported as off_machine; it must be 0).

Per sender and scenario, from the receiver's getStats (one sample a second) and the timecode
read in the viewer page from every presented frame: fps (mean, worst second), resolution,
freezes (getStats freezeCount / totalFreezesDuration, and gaps over 1 s), packet loss,
delivered Mbit/s, queueing delay (candidate-pair RTT, and tbf's own backlog), glass-to-glass
median / p95, seconds to settle after each step; castd / libwebrtc ratios. Writes
artifacts/bench/bottleneck.json and bottleneck-<scenario>.png (rate and delay over time for
each sender). A benchmark, not a test: it prints figures and never fails on them.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from castkit.bench import bottleneck_metrics as bm
from castkit.bottleneck_link import BottleneckLink
from castkit.castd_build import binary
from castkit.paths import CASTKIT, PYTHON, REPO

PREFS = {"autoQuality": True, "resolution": "1080p", "frameRate": 30}
WARMUP_S = 5.0            # the targets ignore the first 5 s after the first frame (issue 14)

# name → (segments [(fraction of the run, rate kbit/s or None)], random loss)
SCENARIOS = {
    "free": ([(1.0, None)], 0.0),
    "2mbit": ([(1.0, 2000)], 0.0),
    "1mbit": ([(1.0, 1000)], 0.0),
    "steps-8-1.5-8": ([(1 / 3, 8000), (1 / 3, 1500), (1 / 3, 8000)], 0.0),
    "2mbit-2pct-loss": ([(1.0, 2000)], 0.02),
    # issue 32's repeated sharp falls: 4.4 Mbit/s, then 1.2 for 3 s in every 6 s, five times (with
    # --seconds 60; the fractions scale with it); asked for by name, not in the default set
    "falls-4.4-1.2": ([(0.25, 4400)] + [(0.05, 1200), (0.05, 4400)] * 5 + [(0.25, 4400)], 0.0),
    # a bulk TCP download through the same link for the whole run (castkit/tcp_bulk.py); asked
    # for by name, not in the default set: {1,2,4}mbit-tcp-{cubic,bbr}
    **{f"{r}mbit-tcp-{cc}": ([(1.0, r * 1000)], 0.0) for r in (1, 2, 4) for cc in ("cubic", "bbr")},
}
TCP = {f"{r}mbit-tcp-{cc}": cc for r in (1, 2, 4) for cc in ("cubic", "bbr")}
SENDERS = ("castd", "libwebrtc", "libwebrtc-detail")
HINTS = {"libwebrtc": "motion", "libwebrtc-detail": "detail"}


def log(msg: str) -> None:
    print(f"bench --bottleneck: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- outer: namespaces and the guard

def outer(a: argparse.Namespace, argv: list[str], script: str = __file__, result: str = "bottleneck.json") -> int:
    """Makes the link and the guard, runs `script --inner argv` in the sender namespace, and
    adds the guard's counts (off_machine) to its JSON result `a.out`/`result`."""
    if os.geteuid() != 0:
        print("Scripts/bench: the real bottleneck needs root (network namespaces, tc, nftables)", file=sys.stderr)
        return 2
    from castkit.confine import Guard
    tag = secrets.token_hex(2)
    link = BottleneckLink(tag)
    guard = None
    try:
        link.up()
        guard = Guard(f"b{tag}")
        guard.add_namespace(link.ns_s)
        env = dict(os.environ, BN_TAG=tag)
        r = subprocess.run(["ip", "netns", "exec", link.ns_s, PYTHON, script, "--inner", *argv], env=env,
                           preexec_fn=guard.join)
        off = guard.counters()
        inside = guard.counters(link.ns_s)
        out = Path(a.out) / result
        if out.exists():
            res = json.loads(out.read_text())
            res["off_machine"] = {"root_namespace": off, "sender_namespace_positive_control": inside}
            out.write_text(json.dumps(res, indent=1, sort_keys=True))
        log(f"packets of the run off the machine: {off.get('run_any')} (sent on the link: {inside.get('run_any')})")
        return r.returncode
    finally:
        if guard:
            guard.close()
        link.down()


# ---------------------------------------------------------------- inner: one sender in one scenario

class RxProc:
    """castkit/bottleneck_rx.py in the receiver namespace (rxproc.ReceiverProc), driven by JSON lines."""

    def __init__(self, proc):
        self.p = proc

    @classmethod
    async def start(cls, link: BottleneckLink, stack, logf: Path) -> "RxProc":
        from castkit.confine import CONFINED_ENV, confined_env_value
        from castkit.rxproc import ReceiverProc
        cfg = {"api_url": stack.api_url, "forward_to": link.addr_s}
        env = dict(os.environ, **{CONFINED_ENV: confined_env_value(link.ns_r)})
        return cls(await ReceiverProc.spawn(["ip", "netns", "exec", link.ns_r], cfg, logf, env=env,
                                            script=CASTKIT / "bottleneck_rx.py", limit=1 << 26))

    async def cmd(self, timeout: float = 90, **msg) -> dict:
        return await self.p.call(timeout, **msg)

    async def close(self) -> None:
        await self.p.close(timeout=20)


class Castd:
    """`castd pair --pin`, then `castd --session` casting the Xvfb screen."""

    def __init__(self, binary: str, stack, display: str, home: Path):
        from castkit.castd_proc import castd_env
        self.binary = binary
        self.env = castd_env(stack, home, DISPLAY=display)
        self.proc = None
        self.lines: list[tuple[float, str]] = []
        self.pair_out = ""

    async def pair(self, pin: str) -> None:
        p = await asyncio.create_subprocess_exec(self.binary, "pair", "--pin", pin, "--json", env=self.env,
                                                 stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(p.communicate(), 90)
        self.pair_out = (out + err).decode(errors="replace")
        if p.returncode != 0:
            raise RuntimeError(f"castd pair exited {p.returncode}: {self.pair_out[-600:]}")

    async def start(self, session_id: str) -> None:
        self.proc = await asyncio.create_subprocess_exec(self.binary, "--session", session_id, "--log-level", os.environ.get("CASTD_LOG_LEVEL", "info"),
                                                         env=self.env, stdout=asyncio.subprocess.DEVNULL,
                                                         stderr=asyncio.subprocess.PIPE)
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while line := await self.proc.stderr.readline():
            self.lines.append((time.monotonic(), line.decode(errors="replace").rstrip("\n")))

    def stats(self) -> list[dict]:
        """castd's `event=stats` lines (every 5 s): the integer fields, with "t"."""
        return [{"t": t, **{k: int(v) for k, v in re.findall(r"(\w+)=(-?\d+)\b", l)}}
                for t, l in self.lines if "event=stats" in l]

    async def stop(self) -> None:
        if self.proc and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except asyncio.TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        if self.proc:
            await asyncio.wait_for(self.reader, 5)


def castd_window(stats: list[dict], t0: float, t1: float) -> dict:
    """What castd says it did over the stats lines that span [t0, t1]."""
    st = [s for s in stats if t0 - 5 <= s["t"] <= t1 + 5]
    if len(st) < 2:
        return {}
    a, b = st[0], st[-1]
    span = b["t"] - a["t"]
    d = {k: b.get(k, 0) - a.get(k, 0) for k in ("frames_sent", "kbytes_sent", "nacks", "retransmits", "copies",
                                                "nacks_ignored", "plis", "keyframes_sent", "ring_dropped")}
    d["sent_mbps"] = round(d.pop("kbytes_sent") * 1024 * 8 / span / 1e6, 3) if span > 0 else None
    d["sent_fps"] = round(d["frames_sent"] / span, 1) if span > 0 else None
    d["rtt_ms_last"] = b.get("rtt_ms")
    return d


class Run:
    """The shared parts of the inner run: link, stack, screen, receiver, the sender browser."""

    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.link = BottleneckLink(os.environ["BN_TAG"])
        self.out = Path(a.out)
        self.logs = self.out / "bottleneck-logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.samples: list[dict] = []
        self.sampling = True

    async def sample_link(self) -> None:
        while self.sampling:
            s = await asyncio.to_thread(self.link.backlog)
            self.samples.append({"t": time.monotonic(), "rate_kbit": self.link.rate_kbit, **s})
            await asyncio.sleep(0.25)

    async def one(self, scenario: str, kind: str, seconds: float) -> dict:
        segments, loss = SCENARIOS[scenario]
        link = self.link
        link.set_rate(segments[0][1])
        link.set_loss(loss)
        n0 = len(self.samples)
        rx_session = await self.rx.cmd(cmd="create")
        sid, pin = rx_session["sessionId"], rx_session["pin"]
        home = Path(tempfile.mkdtemp(prefix="castd-bn-"))
        castd = sender = page = client = flow = None
        tcp_series: list = []
        frames: list = []
        stats: list = []
        outbound: list = []
        try:
            if kind == "castd":
                castd = Castd(self.a.castd, self.stack, self.screen.display, home)
                pairing = asyncio.create_task(castd.pair(pin))
                await self.rx.cmd(cmd="approve", prefs=PREFS, codec=self.a.castd_codec)
                await pairing
                await castd.start(sid)
            else:
                from castkit.canvas_sender import CanvasSender, map_clock, page_js
                from castkit.signaling import StackClient, StackConfig
                page = await self.browser.new_page("about:blank")
                await page.evaluate(page_js(paint_fps=self.a.painter_fps), timeout=60)
                await map_clock(page)
                client = StackClient(StackConfig(self.stack.api_url, self.stack.supabase_url, self.stack.key))
                await client.sign_in()
                sender = CanvasSender(client, page, hint=HINTS[kind], max_bitrate=self.a.max_bitrate,
                                      codec=self.a.libwebrtc_codec)
                await sender.pair(pin=pin)
                approving = asyncio.create_task(self.rx.cmd(cmd="approve", prefs=PREFS))
                await sender.wait_approved(timeout=60)
                await sender.start()
                await approving
            deadline = time.monotonic() + 45
            while not frames:
                got = await self.rx.cmd(cmd="report")
                frames += got["frames"]
                stats += got["stats"]
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{kind}: no frame within 45 s (viewer state {got.get('state')})")
                await asyncio.sleep(0.5)
            t_start = frames[0][0]
            if scenario in TCP:      # the competing download, from the cast's first frame to its end
                from castkit.tcp_bulk import BulkFlow
                flow = BulkFlow(link.ns_r, link.addr_r, TCP[scenario])
                await flow.start()
            steps = []
            offset = 0.0
            for frac, rate in segments:
                at = t_start + offset
                while time.monotonic() < at:
                    await asyncio.sleep(min(0.5, at - time.monotonic()))
                    if time.monotonic() - (stats[-1]["t"] if stats else 0) > 2:
                        got = await self.rx.cmd(cmd="report")
                        frames += got["frames"]
                        stats += got["stats"]
                if rate != link.rate_kbit:
                    link.set_rate(rate)
                steps.append((time.monotonic() if steps else t_start, rate))
                offset += frac * seconds
            t_end = t_start + seconds
            while time.monotonic() < t_end:
                await asyncio.sleep(min(2.0, max(0.0, t_end - time.monotonic())))
                got = await self.rx.cmd(cmd="report")
                frames += got["frames"]
                stats += got["stats"]
                if sender:
                    outbound.append({"t": time.monotonic(), **((await sender.outbound()) or {})})
            await asyncio.sleep(1.2)           # one more getStats sample after the end
            got = await self.rx.cmd(cmd="report")
            frames += got["frames"]
            stats += got["stats"]
        finally:
            if flow:
                tcp_series = await flow.stop()
            if castd:
                await castd.stop()
                (self.logs / f"{scenario}-{kind}-castd.log").write_text("\n".join(l for _, l in castd.lines) + "\n")
            if sender:
                (self.logs / f"{scenario}-{kind}-sender.log").write_text(
                    "\n".join(f"{t:.3f} {n} {f}" for t, n, f in sender.events) + "\n")
                await sender.stop()
            if client:
                await client.close()
            if page:
                await page.close()
            await self.rx.cmd(cmd="close")
            link.set_loss(0)
        link_samples = self.samples[n0:]
        t0, t1 = t_start + WARMUP_S, t_end
        summary = bm.summarize(frames, stats, link_samples, steps, t0, t1)
        summary["first_frame_at"] = t_start
        if castd:
            summary["castd"] = castd_window(castd.stats(), t0, t1)
        if outbound:
            last = outbound[-1]
            first = next((o for o in outbound if o["t"] >= t0 and o.get("bytesSent") is not None), None)
            summary["libwebrtc"] = {k: last.get(k) for k in ("encoderImplementation", "codec", "frameWidth", "frameHeight",
                                                             "qualityLimitationReason", "targetBitrate")}
            if first and last.get("bytesSent") is not None and last["t"] > first["t"]:
                span = last["t"] - first["t"]
                summary["libwebrtc"]["sent_mbps"] = round((last["bytesSent"] - first["bytesSent"]) * 8 / span / 1e6, 3)
                summary["libwebrtc"]["encoded_fps"] = round(((last.get("framesEncoded") or 0)
                                                             - (first.get("framesEncoded") or 0)) / span, 2)
        if flow:
            from castkit.tcp_bulk import mbps
            media = summary.get("delivered_mbps") or 0
            tcp = round(mbps(tcp_series, t0, t1), 3)
            rate = (segments[0][1] or 0) / 1000
            summary["tcp"] = {"cc": TCP[scenario], "mbps": tcp, "share": round(tcp / rate, 3) if rate else None,
                              "media_share": round(media / rate, 3) if rate else None,
                              # each 10 s: the download's and the cast's share are judged over a minute
                              "mbps_per_10s": [round(mbps(tcp_series, a, a + 10), 3)
                                               for a in [t0 + 10 * k for k in range(int((t1 - t0) // 10))]]}
        rel = lambda t: round(t - t_start, 2)  # noqa: E731
        summary["timeline"] = {
            "delivered_mbps": [[rel(t), round(m, 3)] for t, m in bm.rate_series(stats)],
            "rtt_ms": [[rel(s["t"]), s["roundTripTimeMs"]] for s in stats if s.get("roundTripTimeMs") is not None],
            "queue_ms": [[rel(s["t"]), round(q, 1)] for s in link_samples if (q := bm.queue_ms(s)) is not None],
            "capacity_mbps": [[rel(t), r / 1000 if r else None] for t, r in steps],
            "fps": bm.per_second_counts([t for t, _ in frames], t_start, t_end),
            "tcp_mbps": [[rel(a), round(mbps(tcp_series, a, a + 1), 3)] for a in
                         [t_start + k for k in range(int(t_end - t_start))]] if flow else [],
            "glass_to_glass_ms": [[rel(t), round((t - d) * 1000, 1)] for t, c in frames
                                  if (d := bm.decode_timecode(c, t)) is not None and t >= t_start],
        }
        return summary

    async def main(self) -> dict:
        from castkit.bench.host import machine
        from castkit.bench.screen import BenchScreen
        from castkit.devstack import devstack_down, devstack_up
        from castkit.chromium import Chromium
        from castkit.confine import CONFINED_ENV, confined_env_value
        # The whole run is confined (no route off the machine, the outer guard's cgroup): the
        # sender's browser needs no guard of its own.
        os.environ[CONFINED_ENV] = confined_env_value(self.link.ns_s)
        a = self.a
        result = {"command": " ".join(["Scripts/bench"] + a.argv),
                  "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "config": {"castd": a.castd, "seconds": a.seconds, "steps_seconds": a.steps_seconds,
                             "warmup_s": WARMUP_S, "painter_fps": a.painter_fps, "max_bitrate": a.max_bitrate, "libwebrtc_codec": a.libwebrtc_codec,
                             "castd_codec": a.castd_codec or "h264",
                             "tbf": "rate R burst max(5000 B, 1.25 R/HZ) latency 200ms on the sender's veth egress",
                             "prefs": PREFS, "senders": list(a.sender)},
                  "scenarios": []}
        self.stack = devstack_up(listen="0.0.0.0", signaling_rate_limit=100000)
        sampler = None
        try:
            self.screen = BenchScreen(1920, 1080, "busy", timecode=True, fps=a.painter_fps).__enter__()
            self.rx = await RxProc.start(self.link, self.stack, self.logs / "receiver.log")
            self.browser = await Chromium(hide_mdns=False).start() if any(k != "castd" for k in a.sender) else None
            sampler = asyncio.create_task(self.sample_link())
            for i, name in enumerate(a.scenario):
                seconds = a.steps_seconds if name.startswith("steps") else a.seconds
                order = a.sender if i % 2 == 0 else tuple(reversed(a.sender))
                entry: dict = {"scenario": name, "seconds": seconds, "loss": SCENARIOS[name][1],
                               "segments": [[round(f * seconds, 1), r] for f, r in SCENARIOS[name][0]]}
                for kind in order:
                    log(f"{name}: {kind} ({seconds:.0f} s)")
                    # The X screen's painter is castd's picture only: stopped while Chromium's sender
                    # runs (it paints its own canvas), so the two cores are not shared with it.
                    self.screen.painter.send_signal(signal.SIGCONT if kind == "castd" else signal.SIGSTOP)
                    try:
                        entry[kind] = await self.one(name, kind, seconds)
                        s = entry[kind]
                        log(f"{name}: {kind}: {s['fps_mean']} fps (worst s {s['fps_worst_second']}), "
                            f"{s['resolution']}, freezes {s['freezes']} ({s['freezes_s']} s), loss {s['loss_percent']} %, "
                            f"{s['delivered_mbps']} Mbit/s, RTT {s['rtt_ms_median']} ms, queue {s['queue_ms_median']} ms, "
                            f"g2g {s['glass_to_glass_ms_median']} / {s['glass_to_glass_ms_p95']} ms"
                            + (f", settle {[x['settle_s'] for x in s['settle']]}" if s.get("settle") else "")
                            + (f", falls (drained s, worst after 1 s ms; tbf queue peak ms, emptied s) "
                               f"{[(x['drained_s'], x['worst_after_1s_ms'], x.get('queue_peak_ms'), x.get('queue_emptied_s')) for x in s['falls']]}"
                               if len(s.get("falls") or []) > 1 else ""))
                    except Exception as e:  # a failed run is reported; the bench goes on
                        log(f"{name}: {kind} failed: {type(e).__name__}: {e}")
                        with (self.logs / "errors.txt").open("a") as f:
                            f.write(f"--- {name} {kind}\n{traceback.format_exc()}\n")
                        entry[kind] = {"error": f"{type(e).__name__}: {e}"[:2000]}
                c, w = entry.get("castd"), entry.get("libwebrtc")
                if c and w and "error" not in c and "error" not in w:
                    entry["castd_over_libwebrtc"] = bm.ratios(c, w)
                if c and "error" not in c:
                    if name == "2mbit":
                        entry["targets"] = bm.targets_2mbit(c, w if w and "error" not in w else None)
                    elif name.startswith("steps"):
                        entry["targets"] = bm.targets_steps(c)
                    elif name == "free":
                        entry["targets"] = {">= 29 fps": c["fps_mean"] >= 29}
                result["scenarios"].append(entry)
        finally:
            self.sampling = False
            if sampler:
                await sampler
            if getattr(self, "browser", None):
                await self.browser.close()
            if getattr(self, "rx", None):
                await self.rx.close()
            if getattr(self, "screen", None):
                self.screen.painter.send_signal(signal.SIGCONT)
                self.screen.stop()
            devstack_down(self.stack.state_dir)
            self.link.set_rate(None)
        result["machine"] = machine()
        result["machine"]["note"] = ("2 cores shared with other work (Swift builds) while measuring; the senders run "
                                     "one after the other, castd first in odd scenarios, second in even ones")
        return result


def table(result: dict) -> str:
    """The result as a Markdown table (the shape of docs/performance.md's tables)."""
    rows = ["| link | sender | fps mean (worst s) | resolution | freezes (s) | loss | delivered Mbit/s | RTT median "
            "| glass-to-glass median (p95) | decoder QP | settle |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in result["scenarios"]:
        for kind in SENDERS:
            s = e.get(kind)
            if not s:
                continue
            if "error" in s:
                rows.append(f"| {e['scenario']} | {kind} | error: {s['error'][:80]} ||||||||||")
                continue
            settle = ", ".join(f"{x['kind']} {x['settle_s']} s" for x in s.get("settle", [])) or (
                f"TCP ({s['tcp']['cc']}) beside: {s['tcp']['mbps']} Mbit/s" if s.get("tcp") else "—")
            rows.append(f"| {e['scenario']} | {kind} | {s['fps_mean']} ({s['fps_worst_second']}) | {s['resolution']} "
                        f"| {s['freezes']} ({s['freezes_s']}) | {s['loss_percent']} % | {s['delivered_mbps']} "
                        f"| {s['rtt_ms_median']} ms | {s['glass_to_glass_ms_median']} ({s['glass_to_glass_ms_p95']}) ms "
                        f"| {s.get('decoder_qp_mean') or '—'} | {settle} |")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(prog="Scripts/bench --bottleneck", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bottleneck", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="20 s per steady scenario, 36 s for the steps (~8 min)")
    ap.add_argument("--seconds", type=float, help="seconds per steady scenario (default 50; --quick 20)")
    ap.add_argument("--steps-seconds", type=float, help="seconds of the 8 → 1.5 → 8 run (default 60; --quick 36)")
    ap.add_argument("--scenario", action="append", choices=list(SCENARIOS),
                    help="repeatable (default: the five without a TCP download; 2mbit-tcp-cubic and 2mbit-tcp-bbr "
                         "share the 2 Mbit/s link with a bulk TCP download, 1mbit-* and 4mbit-* a 1 or 4 Mbit/s one; falls-4.4-1.2 drops 4.4 → 1.2 Mbit/s "
                         "for 3 s in every 6, five times, and reports each fall's drain)")
    ap.add_argument("--sender", action="append", choices=list(SENDERS),
                    help="repeatable (default: castd and libwebrtc; libwebrtc-detail is contentHint 'detail')")
    ap.add_argument("--castd", help="the castd binary to run (default: this checkout's release build, or CASTD_BIN_DIR's)")
    ap.add_argument("--painter-fps", type=float, default=30, help="how often both pictures (and timecodes) are redrawn")
    ap.add_argument("--max-bitrate", type=int, default=4_000_000, help="libwebrtc's maxBitrate (spec §7: 4 Mbit/s)")
    ap.add_argument("--libwebrtc-codec", choices=["h264", "vp8"], default="vp8",
                    help="the codec Chromium's sender puts first (default vp8: Chromium's OpenH264 cannot code the busy picture, 130-540 KB frames at 1-3 fps on a quiet machine)")
    ap.add_argument("--castd-codec", choices=["vp8"],
                    help="the receiver page prefers VP8 in its answer to castd (?codec=vp8), as a receiver without "
                         "H.264 answers; default: its own answer (H.264)")
    ap.add_argument("--out", default=str(REPO / "artifacts" / "bench"), help="directory for bottleneck.json and plots")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    argv = sys.argv[1:]
    a = p = ap.parse_args(argv)
    a.argv = [x for x in argv if x != "--inner"]
    a.castd = str(Path(a.castd).resolve()) if a.castd else binary("castd")
    a.seconds = a.seconds or (20.0 if a.quick else 50.0)
    a.steps_seconds = a.steps_seconds or (36.0 if a.quick else 60.0)
    a.scenario = a.scenario or [n for n in SCENARIOS if n not in TCP and not n.startswith("falls")]
    a.sender = tuple(k for k in SENDERS if k in (a.sender or ("castd", "libwebrtc")))
    del p
    if "castd" in a.sender and not os.access(a.castd, os.X_OK):
        print(f"Scripts/bench --bottleneck: no castd at {a.castd} (build it, or pass --castd PATH)", file=sys.stderr)
        return 2
    if not a.inner:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        (Path(a.out) / "bottleneck.json").unlink(missing_ok=True)
        rc = outer(a, argv)
        f = Path(a.out) / "bottleneck.json"
        if f.exists():
            res = json.loads(f.read_text())
            print(table(res))
            print(json.dumps({e["scenario"]: {"targets": e.get("targets"), "castd_over_libwebrtc": e.get("castd_over_libwebrtc")}
                              for e in res["scenarios"]}, indent=1))
            log(f"JSON in {f}; plots {', '.join(res.get('plots', []))}")
        return rc
    result = asyncio.run(Run(a).main())
    out = Path(a.out)
    try:
        from castkit.bench import bottleneck_plots
        result["plots"] = bottleneck_plots.draw(result, out)
    except Exception as e:  # plots are a convenience; the JSON is the result
        log(f"plots failed: {type(e).__name__}: {e}")
    (out / "bottleneck.json").write_text(json.dumps(result, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
