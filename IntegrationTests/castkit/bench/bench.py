"""Scripts/bench: castd and a GStreamer sender side by side, glass to glass.

For each scenario (screen size × background) an Xvfb screen shows the bench
painter's content with the CLOCK_MONOTONIC timecode in its top-left corner
(painter.py, timecode.py). Rounds alternate castd and the GStreamer sender
(gst_sender.py) on that same screen; in each round a receiver on the local
stack creates a session, the sender pairs with its PIN and waits subscribed,
the receiver approves, and an aiortc answerer (receiver.py) decodes every
frame and reads the timecode: glass-to-glass latency = decode time − drawn
time, same machine, same clock. CPU (user + sys of the sender's process
tree) and its peak RSS come from /proc; bitrate from the RTP payload bytes
that arrived.

The audio rows (1080p-busy-audio, 1080p-idle-audio, issue 18; asked for by
name, not in the default set): a private PipeWire (castkit.audio_rig) whose virtual sink plays
a 1 kHz tone; each sender runs with desktop audio (castd --audio auto; the
GStreamer sender with gst.opus: pipewiresrc → opusenc → rtpopuspay in the
same webrtcbin) and without (castd --audio off; the GStreamer sender video
only), the receiver accepting audio and counting the audio packets and
decoded audio it got. "audio_cost" is with − without per sender. Writes artifacts/bench/bench.json and PNG plots; prints the
JSON summary.

The quality rows (issue 32; --quality [--content text|slides|video|busy]..., or the
quality-1080p-* scenarios by name): the painter draws content that is a pure function of
the timecode it shows (content.py); the receiver keeps the decoded luma of one frame with a
readable timecode per --quality-every seconds, and after the round each is compared with
the source redrawn from its timecode (quality.py: SSIM and PSNR on BT.709 luma). Per sender:
SSIM mean and 5th percentile, PSNR mean, beside fps and glass-to-glass.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

from castkit.bench import content as contents, proctree, quality, quality_links, receiver, round_rx, rss_map
from castkit.bench.host import machine
from castkit.bench.screen import BenchScreen
from castkit.bench.stats import quantile, ratio
from castkit.audio_rig import PipeWireAudioRig, write_tone
from castkit.castd_proc import castd_env
from castkit.devstack import devstack_down, devstack_up
from castkit.castd_build import binary
from castkit.paths import REPO

SCENARIOS = {
    "1080p-static": (1920, 1080, "static"),
    "1080p-busy": (1920, 1080, "busy"),
    "1440p-busy": (2560, 1440, "busy"),
    "720p-busy": (1280, 720, "busy"),
    # Nothing on the screen changes, not even the timecode: what a sender costs while
    # the desktop sits still (the target: castd below 5% of one core). No latency
    # figures (no timecode to read), and gaps between frames are expected, not freezes.
    "1080p-idle": (1920, 1080, "static"),
    # VP8 (issue 15): the receiver answers VP8 alone (as Firefox does); castd follows the answer,
    # the GStreamer sender runs vp8enc with castd's libvpx settings (gst.vp8).
    "1080p-busy-vp8": (1920, 1080, "busy"),
    # Desktop audio (issue 18): each sender with and without audio, a 1 kHz tone playing;
    # at rest too, where the video costs castd little and audio's own cost stands out.
    "1080p-busy-audio": (1920, 1080, "busy"),
    "1080p-idle-audio": (1920, 1080, "static"),
}
# The quality rows (issue 32): deterministic content keyed on the timecode (content.py).
QUALITY = {f"quality-1080p-{c}": (1920, 1080, c) for c in contents.CONTENTS}
IDLE = {"1080p-idle", "1080p-idle-audio"}
VP8 = {"1080p-busy-vp8"}
AUDIO = {"1080p-busy-audio", "1080p-idle-audio"}
DEFAULT_SCENARIOS = [n for n in SCENARIOS if n not in AUDIO]
AUDIO_SINK = "castd-test-sink"   # the rig's virtual sink (castkit.audio_rig)
SENDERS = ("castd", "gstreamer")
PREFS = {"autoQuality": True, "resolution": "1080p", "frameRate": 30}
FREEZE_S = 0.2
CASTD: str | None = None   # --castd: another build of castd (before/after comparisons); default this tree's release build
H264_PROFILE: str | None = None   # --h264-profile: castd's, passed on; the receiver then takes High too
QUALITY_CODEC = "h264"            # --codec: what the receiver answers in the quality rows
MAX_KBPS: int | None = None       # --max-bitrate-kbps: castd's max-bitrate-kbps (CASTD_MAX_BITRATE_KBPS)


def castd_binary() -> str:
    return CASTD or binary("castd")


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


async def _read_lines(stream, into: list[str]) -> None:
    while True:
        line = await stream.readline()
        if not line:
            return
        into.append(line.decode(errors="replace").rstrip("\n"))


async def _wait_for(lines: list[str], text: str, proc, timeout: float) -> None:
    end = time.monotonic() + timeout
    while not any(text in l for l in lines):
        if proc.returncode is not None:
            raise RuntimeError(f"sender exited ({proc.returncode}) before '{text}':\n" + "\n".join(lines[-20:]))
        if time.monotonic() > end:
            raise RuntimeError(f"no '{text}' within {timeout} s:\n" + "\n".join(lines[-20:]))
        await asyncio.sleep(0.02)


class SenderProc:
    """castd (pair, then --session while still waiting for approval) or the GStreamer sender."""

    def __init__(self, kind: str, stack, screen: BenchScreen, home: Path, codec: str = "h264",
                 rig: PipeWireAudioRig | None = None, audio: bool = False, binary: str | None = None):
        self.kind, self.stack, self.screen, self.home, self.codec = kind, stack, screen, home, codec
        self.binary = binary or castd_binary()   # castd's: this tree's (or --castd), or another build
        self.rig, self.audio = rig, audio   # with a rig: its PipeWire in reach; audio: send it or not
        self.procs: list[asyncio.subprocess.Process] = []
        self.out: list[str] = []
        self.err: list[str] = []
        self.tasks: list[asyncio.Task] = []

    def _spawn_readers(self, p) -> None:
        self.tasks += [asyncio.create_task(_read_lines(p.stdout, self.out)),
                       asyncio.create_task(_read_lines(p.stderr, self.err))]

    async def start(self, pin: str, session_id: str) -> int:
        env = castd_env(self.stack, self.home, DISPLAY=self.screen.display, **(self.rig.env() if self.rig else {}),
                        **({"CASTD_MAX_BITRATE_KBPS": str(MAX_KBPS)} if MAX_KBPS else {}))
        audio_flag = [] if self.rig is None else ["--audio", "auto" if self.audio else "off"]
        profile_flag = ["--h264-profile", H264_PROFILE] if H264_PROFILE else []
        if self.kind == "castd":
            pair = await asyncio.create_subprocess_exec(self.binary, "pair", "--pin", pin, "--json", env=env,
                                                        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            self.procs.append(pair)
            self._spawn_readers(pair)
            await _wait_for(self.out, '"paired"', pair, 30)
            daemon = await asyncio.create_subprocess_exec(self.binary, "--session", session_id, "--log-level",
                                                          os.environ.get("CASTD_LOG_LEVEL", "info"),
                                                          *audio_flag, *profile_flag, env=env, stdout=asyncio.subprocess.PIPE,
                                                          stderr=asyncio.subprocess.PIPE)
            self.procs.append(daemon)
            self._spawn_readers(daemon)
            await _wait_for(self.err, "event=subscribed", daemon, 30)
            self.main = daemon
        else:
            p = await asyncio.create_subprocess_exec(
                sys.executable, str(Path(__file__).with_name("gst_sender.py")), "--pin", pin,
                "--display", self.screen.display, "--width", str(self.screen.width), "--height", str(self.screen.height),
                "--codec", self.codec, *(["--audio", AUDIO_SINK] if self.audio else []), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            self.procs.append(p)
            self._spawn_readers(p)
            await _wait_for(self.out, "waiting", p, 30)
            self.main = p
        return self.main.pid

    async def stop(self) -> None:
        for p in reversed(self.procs):
            if p.returncode is None:
                p.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(p.wait(), 10)
                except asyncio.TimeoutError:
                    p.kill()
                    await p.wait()
        for t in self.tasks:
            t.cancel()
        keep = os.environ.get("CASTD_BENCH_LOGS")
        if keep and self.kind == "castd":
            Path(keep).mkdir(parents=True, exist_ok=True)
            (Path(keep) / f"castd-{int(time.time())}-{self.main.pid}.log").write_text("\n".join(self.err) + "\n")

    def castd_stats(self) -> dict:
        """The daemon's last `event=stats` line as a dict (castd only)."""
        lines = [l for l in self.err if "event=stats" in l]
        if not lines:
            return {}
        out = {}
        for field in lines[-1].split():
            k, _, v = field.partition("=")
            if k not in ("level", "event"):
                out[k] = v
        return out


def _max_1s_bitrate(packets: list[tuple[float, int, int]]) -> float:
    best, j, acc = 0, 0, 0
    for i, (t, n, _) in enumerate(packets):
        acc += n
        while packets[j][0] <= t - 1.0:
            acc -= packets[j][1]
            j += 1
        if t - packets[0][0] >= 1.0:
            best = max(best, acc)
    return best * 8


async def run_round(stack, screen: BenchScreen, kind: str, seconds: float, warmup: float, codec: str = "h264",
                    rig: PipeWireAudioRig | None = None, audio: bool = False,
                    content: contents.Content | None = None, quality_every: float = 0.25,
                    rx=None, sender=None) -> dict:
    """One sender casting `screen` for warmup + seconds to one receiver: `rx` (round_rx: a
    LocalReceiver in this process by default, or a RemoteReceiver behind a link), `sender` a
    SenderProc-like object (default: SenderProc of `kind`)."""
    home = Path(tempfile.mkdtemp(prefix="castd-bench-"))
    rx = rx or round_rx.LocalReceiver(stack)
    s = await rx.create()
    sid = s["sessionId"]
    sender = sender or SenderProc(kind, stack, screen, home, codec, rig, audio)
    taken = False
    try:
        pid = await sender.start(s["pin"], sid)
        rss_waiting = proctree.rss_mib(pid)
        t_approve = await rx.answer(screen.width, codec if codec != "h264" else None,
                                    quality_every if content else None, PREFS)
        try:
            t_first = await rx.first_frame(30)
        except RuntimeError as e:
            raise RuntimeError(f"{kind}: {e}:\n" + "\n".join((sender.err + sender.out)[-40:])) from None
        await asyncio.sleep(warmup)
        cpu0, w0, rx0 = proctree.cpu_seconds(pid), time.monotonic(), await rx.cpu()
        await asyncio.sleep(seconds)
        cpu1, w1, rx1 = proctree.cpu_seconds(pid), time.monotonic(), await rx.cpu()
        peak = proctree.peak_rss_mib(pid)
        rss_kinds = proctree.rss_breakdown_mib(pid)
        rss_kinds_map = proctree.smaps_breakdown_mib(pid)
        rss_detail = rss_map.breakdown(pid) if kind == "castd" else {}
        stats = sender.castd_stats() if kind == "castd" else {}
        if sender.main.returncode is not None:   # died mid-round: its figures would be zeros
            raise RuntimeError(f"{kind} exited ({sender.main.returncode}) during the round:\n"
                               + "\n".join((sender.err + sender.out)[-40:]))
        taken = True
    finally:
        await sender.stop()
        if not taken:
            with contextlib.suppress(Exception):
                await rx.close()
    try:
        data = await rx.take(w0, w1)
    finally:
        await rx.close()
    samples = [x for x in data.samples if w0 <= x.decoded <= w1]
    lat = [(x.decoded - x.drawn) * 1000 for x in samples if x.drawn is not None]
    stages = receiver.breakdown(samples, data.packets, data.frames_out, data.decodes)
    times = [x.decoded for x in data.samples if t_first <= x.decoded <= w1]
    # The cast's first two seconds (before the warm-up and the window): how soon it reaches its rate.
    first_2s = sum(1 for t in times if t < t_first + 2.0) / 2.0
    gaps = [b - a for a, b in zip(times, times[1:])]
    pk = [p for p in data.packets if w0 <= p[0] <= w1]
    frame_bytes: dict[int, list[int]] = {}   # RTP timestamp -> [payload bytes, packets], over the whole round
    for _, n, ts in data.packets:
        f = frame_bytes.setdefault(ts, [0, 0])
        f[0] += n
        f[1] += 1
    largest = max(frame_bytes.values(), default=[0, 0])
    span = w1 - w0
    sizes = sorted({f"{x.width}x{x.height}" for x in samples})
    extra = {}
    if rig is not None:
        apk = [p for p in data.audio_packets if w0 <= p[0] <= w1]
        adec = [a for a in data.audio if w0 <= a[0] <= w1]
        extra = {"audio": audio, "audio_packets": len(apk), "audio_packets_per_s": round(len(apk) / span, 1),
                 "audio_bitrate_bps": int(sum(n for _, n in apk) * 8 / span),
                 "audio_decoded_s": round(sum(n for _, n, _ in adec) / 48_000, 2),
                 "audio_level_dbfs": round(quantile([l for _, _, l in adec], 0.5), 1) if adec else None}
    if content is not None:
        color = quality.signalled_color(data.color, codec)
        extra |= measure_quality(content, data.lumas, w0, color) | {"stream_color": color}
    return extra | {
        "sender": kind, "window_s": round(span, 2),
        "approval_to_first_frame_ms": round((t_first - t_approve) * 1000, 1),
        "latencies_ms": [round(v, 2) for v in lat],
        "stages_ms": {k: [round(r[k], 2) for r in stages] for k in (stages[0] if stages else {})},
        "frames": len(samples), "fps": round(len(samples) / span, 2), "fps_first_2s": first_2s,
        "frames_with_readable_timecode": len(lat),
        "freezes": sum(1 for g in gaps if g > FREEZE_S), "longest_gap_ms": round(max(gaps, default=0) * 1000, 1),
        "cpu_s_per_min": round((cpu1 - cpu0) / span * 60, 2),
        "receiver_cpu_s_per_min": round((rx1 - rx0) / span * 60, 2),
        "peak_rss_mib": peak, "rss_waiting_for_approval_mib": rss_waiting, "rss_at_end_mib": rss_kinds,
        "rss_by_mapping_mib": rss_kinds_map, "rss_map_kib": rss_detail,
        "mean_bitrate_bps": int(sum(n for _, n, _ in pk) * 8 / span), "max_1s_bitrate_bps": int(_max_1s_bitrate(pk)),
        "decoded_sizes": sizes, "castd_stats": stats, "codecs": data.codecs, "receiver_plis": data.plis,
        # castd's `video_codec` line: what its encoder made of the answer (codec=h264 profile=high)
        "video_codec": next((l.split("event=video_codec", 1)[1].strip() for l in reversed(sender.err)
                             if "event=video_codec" in l), None),
        "largest_frame_kb": round(largest[0] / 1000, 1), "largest_frame_packets": largest[1],
        # the mean slice QP of the H.264 frames decoded in the window (receiver.QPS; None for VP8)
        "decoder_qp_mean": _mean_of([q for t, _, q in data.qps if w0 <= t <= w1]),
    }


def _mean_of(values: list) -> float | None:
    v = [x for x in values if x is not None]
    return round(sum(v) / len(v), 1) if v else None


def scenario_codec(name: str) -> str:
    """What the receiver answers in a scenario: VP8 in the VP8 row, --codec's in the quality rows."""
    return "vp8" if name in VP8 else QUALITY_CODEC if name in QUALITY else "h264"


def measure_quality(content: contents.Content, lumas: list, w0: float, color: tuple[int, int] | None = None) -> dict:
    """Each kept decoded luma against the source redrawn from its timecode, in the luma the
    stream signals (`color`: quality.luma_as_signalled), scaled to the decoded size when they
    differ, both on the full-range scale (quality.on_full_scale): per frame (seconds into the
    window, SSIM, PSNR dB)."""
    rows = []
    keep = os.environ.get("CASTD_BENCH_LUMAS")   # a directory: each compared pair kept as .npz (decoded, reference)
    for i, (t, v, n, y) in enumerate(lumas):
        h, w = y.shape
        ref = quality.scale_to(quality.luma_as_signalled(contents.render(content, v, n), color), w, h)
        a, b = quality.on_full_scale(y, color), quality.on_full_scale(ref, color)
        rows.append([round(t - w0, 3), round(quality.ssim(a, b), 5), round(quality.psnr(a, b), 3)])
        if keep:
            import numpy as np
            Path(keep).mkdir(parents=True, exist_ok=True)
            np.savez_compressed(Path(keep) / f"{content.name}-{int(time.time() * 1000)}-{i}.npz", decoded=y, reference=ref,
                                v=v, frame=n)
    return {"quality_per_frame": rows}


def summarize(rounds: list[dict]) -> dict:
    lat = [v for r in rounds for v in r["latencies_ms"]]
    mean = lambda k: round(sum(r[k] for r in rounds) / len(rounds), 2)  # noqa: E731
    return {
        "rounds": len(rounds),
        "glass_to_glass_median_ms": round(quantile(lat, 0.5), 1) if lat else None,
        "glass_to_glass_p95_ms": round(quantile(lat, 0.95), 1) if lat else None,
        "approval_to_first_frame_ms": round(quantile([r["approval_to_first_frame_ms"] for r in rounds], 0.5), 1),
        "cpu_s_per_min": mean("cpu_s_per_min"),
        "cpu_s_per_min_range": [min(r["cpu_s_per_min"] for r in rounds), max(r["cpu_s_per_min"] for r in rounds)],
        "cpu_percent_of_one_core": round(mean("cpu_s_per_min") / 60 * 100, 1),
        "receiver_cpu_percent_of_one_core": round(sum(r.get("receiver_cpu_s_per_min", 0) for r in rounds)
                                                  / len(rounds) / 60 * 100, 1),
        "peak_rss_mib": max(r["peak_rss_mib"] for r in rounds),
        "rss_waiting_for_approval_mib": max(r["rss_waiting_for_approval_mib"] for r in rounds),
        "rss_at_end_mib": rounds[-1].get("rss_at_end_mib"),
        # what streaming added to the sender (the GStreamer sender's Python, aiohttp and aiortc
        # imports weigh ~60 MiB before any media; castd's process ~40 MiB)
        "rss_added_by_streaming_mib": round(max(r["peak_rss_mib"] - r["rss_waiting_for_approval_mib"] for r in rounds), 1),
        "mean_bitrate_bps": int(mean("mean_bitrate_bps")),
        "max_1s_bitrate_bps": max(r["max_1s_bitrate_bps"] for r in rounds),
        "frames_delivered": sum(r["frames"] for r in rounds), "fps": mean("fps"),
        "fps_first_2s": mean("fps_first_2s"),
        "readable_timecode_fraction": round(sum(r["frames_with_readable_timecode"] for r in rounds)
                                            / max(1, sum(r["frames"] for r in rounds)), 3),
        "freezes": sum(r["freezes"] for r in rounds),
        "receiver_plis": sum(r.get("receiver_plis", 0) for r in rounds),
        "longest_gap_ms": max(r["longest_gap_ms"] for r in rounds),
        "decoded_sizes": sorted({s for r in rounds for s in r["decoded_sizes"]}),
        "largest_frame_kb": max(r.get("largest_frame_kb", 0) for r in rounds),
        "largest_frame_packets": max(r.get("largest_frame_packets", 0) for r in rounds),
        "latency_breakdown_ms": _summarize_stages(rounds),
        "decoder_qp_mean": _mean_of([r.get("decoder_qp_mean") for r in rounds]),
    } | (_summarize_audio(rounds) if "audio_packets" in rounds[0] else {}) | (
        quality.summary([q[1] for r in rounds for q in r["quality_per_frame"]],
                        [q[2] for r in rounds for q in r["quality_per_frame"]]) if "quality_per_frame" in rounds[0] else {})


def _summarize_stages(rounds: list[dict]) -> dict | None:
    """Glass-to-glass stage by stage (receiver.STAGES, issue 19), over every frame whose
    stages were all recorded: median, p95 and mean per stage. The means add up to the
    mean glass-to-glass; medians do not add up."""
    names = [k for k in rounds[0].get("stages_ms", {})]
    if not names:
        return None
    out = {}
    for k in names:
        v = [x for r in rounds for x in r.get("stages_ms", {}).get(k, [])]
        if v:
            out[k] = {"p50": round(quantile(v, 0.5), 2), "p95": round(quantile(v, 0.95), 2),
                      "mean": round(sum(v) / len(v), 2), "frames": len(v)}
    return out


def _summarize_audio(rounds: list[dict]) -> dict:
    """What reached the receiver as audio (the audio row): packets and decoded seconds in the
    measured windows, the median level of what was decoded (the tone: about −9 dBFS)."""
    levels = [r["audio_level_dbfs"] for r in rounds if r["audio_level_dbfs"] is not None]
    return {"audio_packets": sum(r["audio_packets"] for r in rounds),
            "audio_packets_per_s": round(sum(r["audio_packets_per_s"] for r in rounds) / len(rounds), 1),
            "audio_bitrate_bps": int(sum(r["audio_bitrate_bps"] for r in rounds) / len(rounds)),
            "audio_decoded_s": round(sum(r["audio_decoded_s"] for r in rounds), 2),
            "audio_level_dbfs": round(quantile(levels, 0.5), 1) if levels else None}


AUDIO_COST_KEYS = ("cpu_s_per_min", "peak_rss_mib", "rss_added_by_streaming_mib", "fps", "glass_to_glass_median_ms")


def audio_cost(entry: dict) -> dict:
    """Per sender, what sending audio changed (with − without), and castd's cost over GStreamer's."""
    out: dict = {}
    for kind in SENDERS:
        on, off = entry.get(kind + "+audio"), entry.get(kind)
        if on and off:
            out[kind] = {k: round(on[k] - off[k], 2) for k in AUDIO_COST_KEYS if on[k] is not None and off[k] is not None}
    if "castd" in out and "gstreamer" in out:
        out["castd_over_gstreamer"] = {k: ratio(out["castd"][k], out["gstreamer"][k])
                                       for k in ("cpu_s_per_min", "peak_rss_mib") if k in out["castd"] and k in out["gstreamer"]}
    return out


async def _keep_playing(rig: PipeWireAudioRig, wav: Path) -> None:
    """pw-play plays the tone into the rig's sink, again each time it ends, until cancelled."""
    while True:
        p = rig.play(wav)
        while p.poll() is None:
            await asyncio.sleep(0.5)


RATIO_KEYS = ("glass_to_glass_median_ms", "glass_to_glass_p95_ms", "approval_to_first_frame_ms", "cpu_s_per_min",
              "peak_rss_mib", "rss_added_by_streaming_mib", "mean_bitrate_bps", "max_1s_bitrate_bps", "fps",
              "fps_first_2s")


async def run(args) -> dict:
    stack = devstack_up()
    out = {"command": " ".join(["Scripts/bench"] + sys.argv[1:]), "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "config": {"castd": castd_binary(), "rounds": args.rounds, "seconds_per_round": args.seconds, "warmup_s": args.warmup,
                      "painter_fps": args.painter_fps, "freeze_threshold_ms": FREEZE_S * 1000, "prefs": PREFS,
                      "h264_profile": H264_PROFILE, "max_bitrate_kbps": MAX_KBPS},
           "scenarios": []}
    try:
        for name in args.scenario:
            w, h, bg = SCENARIOS.get(name) or QUALITY[name]
            content = contents.Content(bg, w, h) if name in QUALITY else None
            # (sender, with audio) in round order; the audio row runs each sender with and without
            variants = [(k, a) for k in args.sender for a in ((True, False) if name in AUDIO else (False,))]
            rounds: dict[str, list[dict]] = {k + ("+audio" if a else ""): [] for k, a in variants}
            rig = player = None
            if name in AUDIO:
                rig = await PipeWireAudioRig().start()
                wav = rig.dir / "tone.wav"
                write_tone(wav, 1000, 0.5, seconds=60)
                player = asyncio.create_task(_keep_playing(rig, wav))
            try:
                with BenchScreen(w, h, "static" if content else bg, timecode=name not in IDLE, fps=args.painter_fps,
                                 content=content.name if content else None) as screen:
                    for i in range(args.rounds):
                        order = variants if i % 2 == 0 else list(reversed(variants))
                        for kind, with_audio in order:
                            key = kind + ("+audio" if with_audio else "")
                            log(f"{name} round {i + 1}/{args.rounds}: {key}")
                            try:
                                r = await run_round(stack, screen, kind, args.seconds, args.warmup,
                                                    scenario_codec(name), rig, with_audio,
                                                    content, args.quality_every)
                            except Exception as e:  # a failed round is reported, the bench goes on
                                log(f"{name} {key} round failed: {e}")
                                r = {"sender": kind, "error": str(e)[:2000]}
                            r["round"] = i + 1
                            rounds[key].append(r)
            finally:
                if player:
                    player.cancel()
                if rig:
                    rig.stop()
            entry = {"scenario": name, "screen": f"{w}x{h}", "background": bg, "timecode": name not in IDLE,
                     "content": bg if content else None,
                     "codec": scenario_codec(name)}
            if name in IDLE:
                entry["note"] = ("a still screen without a timecode: no latency; frames are the sender's refreshes, "
                                 "and 'freezes' count its gaps between them")
            for kind in rounds if name in AUDIO else SENDERS:
                ok = [r for r in rounds.get(kind, []) if "error" not in r]
                entry[kind] = summarize(ok) if ok else None
            last = next((r["castd_stats"] for r in reversed(rounds.get("castd", [])) if r.get("castd_stats")), None)
            if entry.get("castd") and last:
                # castd's own counters (its `stats` log line): per-stage p50/p95/max ms over its last
                # 5-s window, ring drops/skips, frames and bytes sent
                entry["castd"]["counters"] = last
            if entry.get("castd") and entry.get("gstreamer"):
                keys = RATIO_KEYS + (("ssim_mean", "psnr_mean_db") if content else ())
                entry["castd_over_gstreamer"] = {k: ratio(entry["castd"].get(k), entry["gstreamer"].get(k)) for k in keys}
            if name in AUDIO:
                if entry.get("castd+audio") and entry.get("gstreamer+audio"):
                    entry["castd_over_gstreamer_with_audio"] = {
                        k: ratio(entry["castd+audio"][k], entry["gstreamer+audio"][k]) for k in RATIO_KEYS}
                entry["audio_cost"] = audio_cost(entry)
            entry["rounds"] = rounds
            out["scenarios"].append(entry)
    finally:
        devstack_down(stack.state_dir)
    out["machine"] = machine()
    return out


def brief(result: dict) -> dict:
    """The result without per-frame latencies (the printed summary)."""
    b = json.loads(json.dumps(result))
    for s in b["scenarios"]:
        for rs in s["rounds"].values():
            for r in rs:
                r.pop("latencies_ms", None)
                r.pop("stages_ms", None)
                r.pop("quality_per_frame", None)
    return b


def main() -> int:
    ap = argparse.ArgumentParser(prog="Scripts/bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1 round of 8 s per sender and scenario (≤ 5 min)")
    ap.add_argument("--rounds", type=int, help="rounds per sender and scenario (default 3; --quick 1)")
    ap.add_argument("--seconds", type=float, help="measured seconds per round (default 20; --quick 8)")
    ap.add_argument("--warmup", type=float,
                    help="seconds after the first frame before measuring (default 1; through --link 3, so that the "
                         "rate controllers have settled on the link)")
    ap.add_argument("--quality", action="store_true",
                    help="the quality rows: SSIM/PSNR of decoded frames against their source (the scenarios of --content)")
    ap.add_argument("--content", action="append", choices=list(contents.CONTENTS),
                    help="with --quality, repeatable: which contents (default: all four)")
    ap.add_argument("--quality-every", type=float, default=0.25,
                    help="seconds between the decoded frames compared (each takes ~1 s of CPU after the round)")
    ap.add_argument("--scenario", action="append", choices=list(SCENARIOS) + list(QUALITY),
                    help="repeatable (default: all but the *-audio rows, which need PipeWire)")
    ap.add_argument("--sender", action="append", choices=list(quality_links.SENDERS),
                    help="repeatable (default: castd and gstreamer; with --link also Chromium's own sender, "
                         "libwebrtc-detail and libwebrtc: contentHint 'detail' and 'motion')")
    ap.add_argument("--castd-before", metavar="PATH",
                    help="with --link: another castd build cast as one more sender, castd-before (a change's "
                         "before and after in one table)")
    ap.add_argument("--link", action="append", metavar="free|KBIT|all",
                    help="with --quality, repeatable: every sender through a real tc tbf bottleneck of KBIT kbit/s "
                         "(or free) to a receiver in another network namespace, in one run (root; all: free, 4000, "
                         "2000 and 1000); writes quality-links.json, its plots and the table "
                         "(castkit/bench/quality_links.py)")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--painter-fps", type=float, default=60, help="how often the timecode is redrawn")
    ap.add_argument("--castd", help="the castd binary to run (default: this tree's release build), "
                                     "e.g. another checkout's, to compare before and after a change")
    ap.add_argument("--codec", choices=("h264", "vp8"), default="h264",
                    help="with --quality: the codec the receiver answers, so every sender sends it (default h264; "
                         "vp8: as Firefox answers)")
    ap.add_argument("--h264-profile", choices=("auto", "high", "baseline"),
                    help="castd's --h264-profile; the receiver then answers H.264 Constrained High (640c1f) too, "
                         "so castd High against castd Baseline is two runs differing in this option only")
    ap.add_argument("--max-bitrate-kbps", type=int,
                    help="castd's max-bitrate-kbps (150-4000): a lower cap on its rate (not a link: the loopback "
                         "path stays free)")
    ap.add_argument("--out", default=str(REPO / "artifacts" / "bench"), help="directory for bench.json and the plots")
    argv = sys.argv[1:]
    args = ap.parse_args(argv)
    global CASTD, H264_PROFILE, MAX_KBPS, QUALITY_CODEC
    CASTD, H264_PROFILE, MAX_KBPS, QUALITY_CODEC = args.castd, args.h264_profile, args.max_bitrate_kbps, args.codec
    import castkit.bench.bench as module   # this module again when run as __main__: the link rows use that one
    module.CASTD, module.H264_PROFILE, module.MAX_KBPS, module.QUALITY_CODEC = CASTD, H264_PROFILE, MAX_KBPS, QUALITY_CODEC
    if args.warmup is None:
        args.warmup = 3.0 if args.link else 1.0
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.seconds = args.seconds or (8.0 if args.quick else 20.0)
    if args.content and not args.quality:
        ap.error("--content chooses the quality rows' content: add --quality")
    if args.link:
        if not args.quality:
            ap.error("--link is for the quality rows: add --quality")
        if "all" in args.link:
            args.link = list(quality_links.LINKS)
        bad = [x for x in args.link if x != "free" and not (x.isdigit() and 100 <= int(x) <= 100_000)]
        if bad:
            ap.error(f"--link takes free or a rate in kbit/s (100-100000), not {', '.join(bad)}")
        args.content = args.content or list(contents.CONTENTS)
        asked = list(args.sender or [k for k in quality_links.SENDERS if k != "castd-before"])
        if args.castd_before:
            args.castd_before = str(Path(args.castd_before).resolve())
            asked.append("castd-before")
        elif "castd-before" in asked:
            ap.error("the castd-before sender needs --castd-before PATH")
        args.sender = tuple(k for k in quality_links.SENDERS if k in asked)
        args.argv = [x for x in argv if x != "--inner"]
        return quality_links.main(args, argv)
    if any(k not in SENDERS for k in args.sender or ()):
        ap.error("Chromium's own sender (libwebrtc, libwebrtc-detail) and castd-before run in the quality rows "
                 "through --link")
    if args.quality:
        args.scenario = (args.scenario or []) + [f"quality-1080p-{c}" for c in (args.content or contents.CONTENTS)]
    args.scenario = args.scenario or DEFAULT_SCENARIOS
    args.sender = tuple(k for k in SENDERS if k in (args.sender or SENDERS))
    with receiver.accepting_h264_high() if H264_PROFILE else contextlib.nullcontext():
        result = asyncio.run(run(args))
    outdir = Path(args.out)
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / "bench.json").write_text(json.dumps(result, indent=1, sort_keys=True))
    try:
        from castkit.bench import plots
        result["plots"] = plots.draw(result, outdir)
    except Exception as e:  # plots are a convenience; the JSON is the result
        log(f"plots failed: {e}")
    print(json.dumps(brief(result), indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
