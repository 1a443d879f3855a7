"""Rows of the TURN family (issue 16): the whole daemon through coturn.

Each row builds its own IntegrationTests/castkit/turn_world.py world (castd and the receiver
each behind a symmetric NAT, coturn and the local stack in the public namespace between them,
no direct path) with turn_cast.py, and removes it afterwards. Scripts/faults.py appends
`rows()` to its scenarios (full set only).
"""
from __future__ import annotations

import asyncio
import contextlib
import re
import time

from castkit.faults.world import Result, check, daemon_sent_fps, frame_figures

BARS_TOLERANCE = 12



@contextlib.asynccontextmanager
async def turn_cast(w, name: str, *, busy: bool = False, chromium: bool = False, relay_only: bool = False,
                    open_path: bool = False, world_kw: dict | None = None, turn_urls: list[str] | None = None,
                    size: tuple[int, int] = (1920, 1080), twcc: bool = False):
    from castkit.bench.screen import BenchScreen
    from castkit.turn_cast import Stack, TurnCast
    from castkit.turn_world import TurnWorld
    from castkit.xscreen import XScreen
    out = w.out / name
    out.mkdir(parents=True, exist_ok=True)
    async with contextlib.AsyncExitStack() as ex:
        world = ex.enter_context(TurnWorld(**(world_kw or {})))
        stack = Stack(world, out, turn_urls).up()
        ex.callback(stack.down)
        ex.callback(lambda: (out / "coturn.log").write_text(world.coturn_log()))
        if busy:    # the benchmark's busy field: random 8×8 blocks scrolling every frame
            display = ex.enter_context(BenchScreen(1920, 1080, "busy", fps=30)).display
        else:
            screen = await XScreen(*size).start()
            ex.callback(screen.stop)
            display = screen.display
        # An open path: the receiver in castd's NAT namespace, which reaches castd's host address
        # directly (and the stack and coturn through its own masquerade).
        cast = TurnCast(world, stack, display, out, chromium=chromium, relay_only=relay_only,
                        receiver_ns="natc" if open_path else "r", twcc=twcc)
        ex.push_async_callback(cast.stop)
        await cast.start()
        w.secrets.update(cast.secrets)
        yield world, cast


def bars_ok(bars: dict) -> bool:
    from castkit.xscreen import BARS
    got = bars.get("bars") or []
    return len(got) == 7 and all(g is not None and max(abs(a - b) for a, b in zip(g, want)) <= BARS_TOLERANCE
                                 for g, want in zip(got, BARS))


class CpuWindow:
    """Percent of a core each process tree used between start() and stop(): castd, the
    receiver (aiortc, or Chromium with its children), coturn; /proc (castkit/bench/proctree.py)."""

    def __init__(self, world, cast):
        self.pids = {"castd": cast.daemon.proc.pid, "receiver": cast.rx.proc.pid, "coturn": world.coturn.pid}
        self.pct: dict[str, float] = {}

    def _now(self) -> dict[str, float]:
        from castkit.bench.proctree import cpu_seconds
        return {k: cpu_seconds(pid) for k, pid in self.pids.items()}

    def start(self) -> None:
        self.t0, self.c0 = time.monotonic(), self._now()

    def stop(self) -> dict[str, float]:
        dt, c1 = time.monotonic() - self.t0, self._now()
        self.pct = {k: round(100 * (c1[k] - self.c0[k]) / dt, 1) for k in c1}
        return self.pct

    def line(self) -> str:
        return "CPU " + ", ".join(f"{k} {v} %" for k, v in self.pct.items())


def controller(c) -> dict:
    """The rate controller's last word in the steady window: the last `stats` line's
    target and frame-rate cap, and the last debug `rate_target` line's estimate."""
    st = c.lines("event=stats")
    last = {k: int(v) for k, v in re.findall(r"(\w+)=(-?\d+)\b", st[-1])} if st else {}
    out = {k: last.get(k) for k in ("target_kbps", "fps_target", "acked_kbps")}
    rt = c.lines("rate_target")
    if rt:
        f = dict(re.findall(r"(\w+)=(\S+)", rt[-1]))
        out.update(rate_target_media_kbps=f.get("media_kbps"), rate_target_usage=f.get("usage"),
                   rate_target_loss=f.get("loss"), rate_target_rtt_ms=f.get("rtt_ms"))
    return out


def controller_line(ctl: dict) -> str:
    return (f"target {ctl.get('target_kbps')} kbit/s, fps_target {ctl.get('fps_target')}, acked "
            f"{ctl.get('acked_kbps')} kbit/s, last rate_target {ctl.get('rate_target_media_kbps')} kbit/s "
            f"usage={ctl.get('rate_target_usage')} loss={ctl.get('rate_target_loss')}‰ rtt={ctl.get('rate_target_rtt_ms')} ms")


def relay_pairs(cast) -> list[dict]:
    return [p for p in cast.selected_pairs() if p.get("local_type") == "relay"]


async def steady(cast, seconds: float, cpu: "CpuWindow | None" = None, settle: float = 0) -> tuple[dict, float, float]:
    """Frame figures over `seconds` of cast, from `settle` s after the 5th frame (the rate
    controller's climb left out where the row is about the steady rate)."""
    t0 = await cast.wait_frames(5, timeout=60) + settle
    await asyncio.sleep(max(0.0, t0 - time.monotonic()))
    if cpu:
        cpu.start()
    await asyncio.sleep(seconds)
    if cpu:
        cpu.stop()
    t1 = time.monotonic()
    return frame_figures((await cast.report())["frames"], t0, t1), t0, t1


async def chromium_relay(w, busy: bool, relay_only: bool, open_path: bool, name: str):
    r = Result(name, ("castd's selected pair relay, the viewer's getStats pair relay, "
                        + ("≥ 29 fps at 1080p busy" if busy else "the bars' pixels arrive") + " (issue 16)"))
    async with turn_cast(w, name, busy=busy, chromium=True, relay_only=relay_only, open_path=open_path) as (world, c):
        cpu = CpuWindow(world, c)
        fig, t0, t1 = await steady(c, 20, cpu, settle=5 if busy else 0)
        rep = await c.report()
        ctl = controller(c)
        bars = {} if busy else await c.rx.cmd(cmd="bars")
        stats = rep.get("stats") or {}
        fps_sent = sent_fps(c, t0, t1)
    local, remote = stats.get("localCandidateType"), stats.get("remoteCandidateType")
    castd_relay = bool(relay_pairs(c))
    ok = (castd_relay and "relay" in (local, remote) and (fig["fps"] >= 29 if busy else bars_ok(bars))
          and (local == "relay" if relay_only else True))
    # The relay's added latency: the pair's ICE round trip through coturn as the viewer measures
    # it (the namespaces add no delay of their own); coturn's CPU over the steady window.
    rtt = stats.get("roundTripTimeMs")
    return check(r, ok, f"castd pair {c.selected_pairs()[-1:] and c.selected_pairs()[-1].get('local_type')}; "
                          f"viewer pair {local}/{remote}; {fig['fps']} fps shown, {fps_sent} sent, longest gap "
                          f"{fig['max_gap_s']} s; RTT through the relay {rtt} ms; {cpu.line()}; {controller_line(ctl)}"
                          + ("" if busy else f"; bars {'match' if bars_ok(bars) else 'WRONG'} {bars.get('size')}"),
                   **fig, fps_sent=fps_sent, viewer_local=local, viewer_remote=remote, castd_relay=castd_relay,
                   size=bars.get("size"), rtt_ms=rtt, cpu_pct=cpu.pct, **ctl)


def sent_fps(c, t0: float, t1: float) -> float | None:
    """Frames the TURN cast's castd sent per second (its own stats lines)."""
    return daemon_sent_fps(c.daemon, t0, t1)


async def aiortc_busy(w):
    name = "TURN: aiortc via coturn, 1080p busy"
    r = Result(name, "castd --session through coturn across two symmetric NATs, aiortc sending transport-cc "
                       "feedback (no REMB, like Chromium): relay pair, ≥ 29 fps at 1080p busy (issue 16)")
    async with turn_cast(w, name, busy=True, twcc=True) as (world, c):
        cpu = CpuWindow(world, c)
        fig, t0, t1 = await steady(c, 20, cpu, settle=5)
        fps_sent = sent_fps(c, t0, t1)
        ctl = controller(c)
    pairs = relay_pairs(c)
    ok = bool(pairs) and fig["fps"] >= 29
    return check(r, ok, f"castd pair {'relay over ' + str(pairs[-1].get('relay_transport')) if pairs else 'NOT relay'}; "
                          f"{fig['fps']} fps received, {fps_sent} sent, longest gap {fig['max_gap_s']} s; "
                          f"{cpu.line()}; {controller_line(ctl)}", **fig, fps_sent=fps_sent, cpu_pct=cpu.pct, **ctl)


async def coturn_restart(w):
    name = "TURN: coturn restarted mid-cast"
    r = Result(name, "consent fails → §11 re-offer with a fresh allocation → the cast resumes through the relay "
                       "(issue 16); the gap measured")
    async with turn_cast(w, name) as (world, c):
        await c.wait_frames(10, timeout=60)
        allocs_before = len(c.lines("turn_allocated"))
        t_stop = time.monotonic()
        world.stop_coturn()
        await asyncio.sleep(3)
        world.start_coturn()
        t_back = time.monotonic()
        try:
            first = await c.wait_frames(5, timeout=90, since=t_back)
            gap, after_restart = round(first - t_stop, 1), round(first - t_back, 1)
        except (TimeoutError, RuntimeError):
            gap = after_restart = None
        rep = await c.report()
        offers = sorted({x["negotiationId"] for x in rep["rows"] if x["type"] == "offer"})
        allocs = c.lines("turn_allocated")
        relays = relay_pairs(c)
        alive = c.daemon.proc.returncode is None
    ok = gap is not None and alive and len(allocs) > allocs_before and len(offers) >= 2 and len(relays) >= 2
    return check(r, ok, f"coturn down 3 s; frames back {gap} s after it stopped ({after_restart} s after the "
                          f"restart); {len(offers)} offers, {len(allocs)} allocations, {len(relays)} relay pairs; "
                          f"castd {'casting' if alive else 'EXITED'}",
                   gap_s=gap, after_restart_s=after_restart, offers=len(offers), allocations=len(allocs),
                   relay_pairs=len(relays))


async def short_lifetime(w):
    minutes = 3
    name = "TURN: 3 min with 60 s allocations"
    r = Result(name, "coturn's allocation lifetime 60 s: castd refreshes (seen in coturn's log), no freeze over 1 s")
    async with turn_cast(w, name, world_kw={"lifetime": 60, "stale_nonce": 45}) as (world, c):
        fig, _, _ = await steady(c, minutes * 60)
        log = world.coturn_log()
        alive = c.daemon.proc.returncode is None
    refreshes = log.count("REFRESH processed, success")
    stale = len(re.findall(r"438", log))
    ok = alive and refreshes >= 4 and fig["freezes_over_1s"] == 0 and bool(relay_pairs(c))
    return check(r, ok, f"{fig['fps']} fps over {minutes} min, longest gap {fig['max_gap_s']} s, "
                          f"{refreshes} refreshes in coturn's log, {stale} lines with 438; castd "
                          f"{'casting' if alive else 'EXITED'}", **fig, refreshes=refreshes, stale_nonce_lines=stale)


def stream_url(transport: str) -> str:
    from castkit.turn_world import TURN_IP, TURN_PORT, TURNS_PORT
    return f"turns:{TURN_IP}:{TURNS_PORT}" if transport == "tls" else f"turn:{TURN_IP}:{TURN_PORT}?transport=tcp"


async def stream_transport(w, transport: str):
    name = f"TURN: daemon over {transport.upper()} to coturn, aiortc"
    r = Result(name, f"ice-config lists only a {transport.upper()} TURN server (RFC 8656 §3.1): the cast flows "
                       f"through it across two symmetric NATs, the selected pair logged with relay_transport={transport}")
    # 640×360 bars: the row is about the transport to the server (and runs with a debug build too).
    async with turn_cast(w, name, world_kw={"tls": transport == "tls"}, turn_urls=[stream_url(transport)],
                         size=(640, 360)) as (world, c):
        fig, t0, t1 = await steady(c, 15)
        bars = await c.rx.cmd(cmd="bars")
        fps_sent = sent_fps(c, t0, t1)
        log = world.coturn_log()
    pairs = relay_pairs(c)
    transports = [p.get("relay_transport") for p in pairs]
    ok = bool(pairs) and transports[-1] == transport and bars_ok(bars) and "ALLOCATE processed, success" in log
    return check(r, ok, f"castd pair relay over {transports[-1:] or 'NO RELAY'}; bars {'match' if bars_ok(bars) else 'WRONG'} "
                          f"{bars.get('size')}; {fig['fps']} fps received, {fps_sent} sent, longest gap {fig['max_gap_s']} s",
                   **fig, fps_sent=fps_sent, relay_transport=transports[-1] if transports else None)


async def tcp_cut(w):
    name = "TURN: coturn's TCP connection cut mid-cast"
    r = Result(name, "the only relay runs over TCP; a TCP reset cuts it: that relay fails at once (turn_failed), "
                       "consent fails, §11 re-offers with a fresh TCP allocation, the cast resumes (gap measured)")
    import subprocess
    # A small screen: the row is about the relay's recovery, and it must run with a debug build too.
    async with turn_cast(w, name, turn_urls=[stream_url("tcp")], size=(640, 360)) as (world, c):
        await c.wait_frames(5, timeout=90)
        allocs_before = len(c.lines("turn_allocated"))
        fails_before = len(c.lines("turn_failed"))
        # In coturn's namespace: every TCP segment castd's NAT sends to port 3478 is answered
        # with a reset (both ends see the connection die); removed once castd noticed.
        rule = ("table inet castdcut {\n"
                "  chain in { type filter hook input priority 0; tcp dport 3478 reject with tcp reset; }\n}\n")
        subprocess.run(world.exec("pub", "nft", "-f", "-"), input=rule, text=True, check=True)
        t_cut = time.monotonic()
        noticed = None
        try:
            deadline = t_cut + 30
            while time.monotonic() < deadline:
                if len(c.lines("turn_failed")) > fails_before:
                    noticed = round(time.monotonic() - t_cut, 2)
                    break
                await asyncio.sleep(0.1)
        finally:
            subprocess.run(world.exec("pub", "nft", "delete", "table", "inet", "castdcut"), check=False)
        try:
            first = await c.wait_frames(5, timeout=90, since=t_cut + max(noticed or 0, 1.0))
            gap = round(first - t_cut, 1)
        except (TimeoutError, RuntimeError):
            gap = None
        rep = await c.report()
        offers = sorted({x["negotiationId"] for x in rep["rows"] if x["type"] == "offer"})
        allocs = c.lines("turn_allocated")
        failed = c.lines("turn_failed")[fails_before:]
        alive = c.daemon.proc.returncode is None
    ok = (noticed is not None and gap is not None and alive and len(allocs) > allocs_before and len(offers) >= 2
          and any("TCP connection" in l for l in failed))
    return check(r, ok, f"relay failure logged {noticed} s after the cut; frames back {gap} s after it; "
                          f"{len(offers)} offers, {len(allocs)} allocations; castd {'casting' if alive else 'EXITED'}"
                          + (f"; {failed[0].split('message=', 1)[-1][:160]}" if failed else ""),
                   noticed_s=noticed, gap_s=gap, offers=len(offers), allocations=len(allocs))


def rows() -> list[tuple]:
    """The TURN rows in Scripts/faults' SCENARIOS shape, group by group."""
    return stream_rows() + relay_rows() + recovery_rows()


def stream_rows() -> list[tuple]:
    """castd's TURN client over TCP and TLS to coturn, and that TCP connection cut."""
    return [
        ("TURN: daemon over TCP to coturn, aiortc", False, stream_transport, ("tcp",), {}),
        ("TURN: daemon over TLS to coturn, aiortc", False, stream_transport, ("tls",), {}),
        ("TURN: coturn's TCP connection cut mid-cast", False, tcp_cut, (), {}),
    ]


def relay_rows() -> list[tuple]:
    """Casts through the UDP relay to aiortc and to Chromium: frame rate, the bars, CPU."""
    return [
        ("TURN: aiortc via coturn, 1080p busy", False, aiortc_busy, (), {}),
        ("TURN: Chromium via coturn, bars", False, chromium_relay, (False, False, False, "TURN: Chromium via coturn, bars"), {}),
        ("TURN: Chromium via coturn, 1080p busy", False, chromium_relay,
         (True, False, False, "TURN: Chromium via coturn, 1080p busy"), {}),
        ("TURN: Chromium relay-only, open path", False, chromium_relay,
         (False, True, True, "TURN: Chromium relay-only, open path"), {}),
    ]


def recovery_rows() -> list[tuple]:
    """coturn restarted mid-cast, and short allocation lifetimes refreshed over minutes."""
    return [
        ("TURN: coturn restarted mid-cast", False, coturn_restart, (), {}),
        ("TURN: 3 min with 60 s allocations", False, short_lifetime, (), {}),
    ]
