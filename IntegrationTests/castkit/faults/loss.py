"""Rows of the loss family: random and burst loss with delay and jitter on the media path, to
aiortc and to Chromium's receiver pages (issue 8 §1)."""
from __future__ import annotations

import asyncio
import contextlib
import os
import time
from dataclasses import dataclass

from castkit.faults.world import Cast, Result, World, casting, check, delta, frame_figures, router_lost, stats_delta


@dataclass
class Window:
    """One impaired stretch of a running cast, as loss_scenario and chromium_loss measure it."""
    before: dict          # the receiver's report just before the impairment
    after: dict           # its report at the end of the impairment
    t0: float             # impairment on (monotonic)
    t1: float             # impairment off
    t_end: float          # after one more castd stats line
    stats: list[dict]     # castd's stats lines from the last one before t0 on
    router_lost: int      # packets the router dropped meanwhile


async def impaired_window(w: World, c: "Cast", seconds: float, impair: dict) -> Window:
    await asyncio.sleep(3)
    n_stats = len(c.stats_lines())
    before = await c.report()
    lost0 = router_lost(w)
    w.impair(**impair)
    t0 = time.monotonic()
    await asyncio.sleep(seconds)
    t1 = time.monotonic()
    after = await c.report()
    await asyncio.sleep(5.5)          # one more castd stats line (every 5 s)
    w.impair()
    return Window(before, after, t0, t1, time.monotonic(), c.stats_lines()[max(0, n_stats - 1):],
                  router_lost(w) - lost0)


async def loss_scenario(w: World, name: str, seconds: float, busy: bool = False, twcc: bool = False,
                        **impair) -> Result:
    desc = ", ".join(f"{k}={v}" for k, v in impair.items())
    r = Result(name, "NACK/RTX and PLI recover: ≥ 24 fps delivered at 1080p30, no freeze over 1 s (issue 8 §1)")
    async with contextlib.AsyncExitStack() as stack:
        display = None
        if busy:        # the benchmark's busy field: random 8×8 blocks scrolling every frame (~3.5 Mbit/s)
            from castkit.bench.screen import BenchScreen
            display = stack.enter_context(BenchScreen(1920, 1080, "busy", fps=30)).display
        c = await stack.enter_async_context(casting(w, name, display=display, twcc=twcc))
        win = await impaired_window(w, c, seconds, impair)
        rep, st = win.after, win.stats
        f = frame_figures(rep["frames"], win.t0, win.t1)
        figs = {**f, "impairment": desc, "nacks": delta(st, "nacks"), "retransmits": delta(st, "retransmits"),
                "copies": delta(st, "copies"), "plis": delta(st, "plis"), "rtt_ms": st[-1].get("rtt_ms") if st else None,
                "router_lost": win.router_lost,
                "offers": sum(1 for x in rep["rows"] if x["type"] == "offer")}
        # castd's stats lines come every 5 s: the rate over the lines that span the window.
        figs["kbit_s_sent"] = round(delta(st, "kbytes_sent") * 8.192 / (5 * (len(st) - 1))) if len(st) >= 2 else None
        ok = f["fps"] >= 24 and f["freezes_over_1s"] == 0 and c.daemon.proc.returncode is None
        return check(r, ok, f"{f['fps']} fps, longest gap {f['max_gap_s']} s, {figs['retransmits']} retransmissions "
                            f"for {figs['nacks']} NACKs, {figs['copies']} redundant copies, "
                            f"{figs['plis']} PLIs, ~{figs['kbit_s_sent']} kbit/s", **figs)


async def chromium_loss(w: World, name: str, seconds: float, busy: bool = False, **impair) -> Result:
    """The loss scenario with the real receiver pages in headless Chromium as the viewer (on the
    benchmark's busy field with `busy`)."""
    from castkit.confine import read_counters
    desc = ", ".join(f"{k}={v}" for k, v in impair.items())
    r = Result(name, "NACK/RTX and PLI recover with Chromium's receiver pages as the viewer: ≥ 24 fps decoded at "
                     "1080p30, no freeze over 1 s (issue 8 §1); nothing of the run leaves the machine")
    table = os.environ.get("FAULTS_GUARD_TABLE")
    if not table:
        raise RuntimeError(f"no off-machine guard for Chromium ({os.environ.get('FAULTS_GUARD_ERROR')})")
    root_ns = os.environ["FAULTS_ROOT_NETNS"]
    root0, inside0 = read_counters(table, root_ns), read_counters(table, w.ns_r)["run_any"]
    async with contextlib.AsyncExitStack() as stack:
        display = None
        if busy:
            from castkit.bench.screen import BenchScreen
            display = stack.enter_context(BenchScreen(1920, 1080, "busy", fps=30)).display
        c = await stack.enter_async_context(casting(w, name, chromium=True, display=display))
        win = await impaired_window(w, c, seconds, impair)
        rep, st, t0, t1, lost = win.after, win.stats, win.t0, win.t1, win.router_lost
        s0, s1 = win.before["stats"], rep["stats"]
        sent_fps = c.sent_fps(t0, win.t_end)
        alive = c.daemon.proc.returncode is None
    # In the machine's namespace, during this row: packets of the run's processes through a real
    # interface, and anyone's mDNS or multicast group reports there.
    root = {k: v - root0.get(k, 0) for k, v in read_counters(table, root_ns).items()}
    inside = read_counters(table, w.ns_r)["run_any"] - inside0
    f = frame_figures(rep["frames"], t0, t1)         # our measure: frames the <video> presented
    span = (s1["at"] - s0["at"]) / 1000
    dec = s1["framesDecoded"] - s0["framesDecoded"]
    freezes = stats_delta(s0, s1, "freezeCount")
    figs = {"decoded_fps": round(dec / span, 1), "presented_fps": f["fps"], "max_gap_s": f["max_gap_s"],
            "gaps_over_1s": f["freezes_over_1s"], "frames_presented": f["frames"], "frames_decoded": dec,
            "chromium_freezes": freezes, "chromium_freezes_s": stats_delta(s0, s1, "totalFreezesDuration"),
            "chromium_pauses": stats_delta(s0, s1, "pauseCount"),
            "nack_count": stats_delta(s0, s1, "nackCount"), "pli_count": stats_delta(s0, s1, "pliCount"),
            "packets_lost": stats_delta(s0, s1, "packetsLost"),
            "retransmitted_packets_received": stats_delta(s0, s1, "retransmittedPacketsReceived"),
            "rtx_ssrc": s1.get("rtxSsrc"),
            "frames_dropped": stats_delta(s0, s1, "framesDropped"),
            "key_frames_decoded": stats_delta(s0, s1, "keyFramesDecoded"),
            "frame_size": f"{s1.get('frameWidth')}x{s1.get('frameHeight')}",
            "jitter_buffer_ms": round(s1["jitterBufferDelayMs"]) if s1.get("jitterBufferDelayMs") is not None else None,
            "impairment": desc, "castd_nacks": delta(st, "nacks"), "castd_retransmits": delta(st, "retransmits"),
            "castd_copies": delta(st, "copies"), "castd_plis": delta(st, "plis"), "rtt_ms": st[-1].get("rtt_ms") if st else None,
            "castd_sent_fps": sent_fps, "router_lost": lost,
            "offers": len(rep["rows"]),
            "off_machine": {k: root.get(k) for k in ("run_any", "mdns_v4", "mdns_v6", "igmp", "mld")},
            "receiver_namespace_packets": inside}
    left = sum(figs["off_machine"].values())
    # inside > 0: the guard did see the receiver's own traffic, so zero outside means confined, not blind.
    ok = figs["decoded_fps"] >= 24 and f["freezes_over_1s"] == 0 and alive and left == 0 and inside > 0
    return check(r, ok, f"{figs['decoded_fps']} fps decoded ({f['fps']} presented, {sent_fps} sent), longest gap "
                        f"{f['max_gap_s']} s; "
                        f"Chromium: {freezes} freezes ({figs['chromium_freezes_s']} s), {figs['nack_count']} NACKs, "
                        f"{figs['pli_count']} PLIs, {figs['packets_lost']} lost, "
                        f"{figs['retransmitted_packets_received']} retransmissions received; castd: "
                        f"{figs['castd_retransmits']} retransmissions for {figs['castd_nacks']} NACKs, "
                        f"{figs['castd_copies']} redundant copies; "
                        f"{left} packets off the machine", **figs)
