"""The receiving end of one bench round (bench.run_round), in this process or behind a link.

`LocalReceiver` is the stack's receiver client and the aiortc `TimecodeReceiver` in this
process: it creates the session, answers and approves, and at the end hands over what it
recorded (`RoundData`). `RemoteReceiver` has the same methods and runs a `LocalReceiver`
in a process of its own, `python round_rx.py CONFIG` started with `ip netns exec` in the
receiver namespace of a bottleneck link (castkit/bottleneck_link.py), so the decoder sits
behind tbf and every packet of the round, signaling included, crosses the link. That
process is driven by JSON lines on stdin, one answer line each on stdout:

  {"cmd":"create"}                                   → {"sessionId", "pin"}
  {"cmd":"answer", "screen_width", "codec", "keep_luma_every", "prefs"}
                                                     → {"t_approve"}
  {"cmd":"first_frame", "within": seconds}           → {"t_first"}
  {"cmd":"cpu"}                                      → {"cpu"}: its CPU seconds so far
  {"cmd":"take", "w0", "w1", "lumas": FILE}          → RoundData as JSON; the kept lumas of
                                                       [w0, w1] written to FILE (.npz)
  {"cmd":"close"}                                    → {"ok"}
  {"cmd":"quit"}

CONFIG (JSON): {"api_url", "supabase_url", "key": the stack's, at its address on the link,
"accept_high": take H.264 High too (receiver.accepting_h264_high)}. Times are
time.monotonic(): CLOCK_MONOTONIC, one clock for every namespace of the machine, so
glass-to-glass needs no mapping.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np


@dataclass
class RoundData:
    """What the receiver recorded over a round (receiver.py's records, as plain data)."""
    samples: list            # receiver.Sample
    packets: list            # (t, payload bytes, RTP timestamp) of every video packet
    audio_packets: list      # (t, payload bytes)
    frames_out: list         # (t, RTP timestamp)
    decodes: list            # (start, end, RTP timestamp)
    audio: list              # (t, samples, dBFS)
    lumas: list              # (t, timecode value, painter frame, luma h × w) in the window
    codecs: list[str] = field(default_factory=list)
    connection_states: list[str] = field(default_factory=list)
    color: tuple[int, int] | None = None    # receiver.Recording.color
    plis: int = 0                           # PLIs the receiver sent on a stalled picture (receiver.STALL_PLI_S)
    qps: list = field(default_factory=list)  # (t, RTP timestamp, mean slice QP) of every H.264 frame (receiver.QPS)

    def to_json(self) -> dict:
        from dataclasses import astuple
        return {"samples": [list(astuple(s)) for s in self.samples], "packets": self.packets,
                "audio_packets": self.audio_packets, "frames_out": self.frames_out, "decodes": self.decodes,
                "audio": self.audio, "lumas": [[t, v, n] for t, v, n, _ in self.lumas],
                "codecs": self.codecs, "connection_states": self.connection_states, "color": self.color,
                "plis": self.plis, "qps": self.qps}

    @classmethod
    def from_json(cls, d: dict, pictures: list[np.ndarray]) -> "RoundData":
        from castkit.bench.receiver import Sample
        return cls(samples=[Sample(*s) for s in d["samples"]], packets=[tuple(p) for p in d["packets"]],
                   audio_packets=[tuple(p) for p in d["audio_packets"]], frames_out=[tuple(f) for f in d["frames_out"]],
                   decodes=[tuple(x) for x in d["decodes"]], audio=[tuple(a) for a in d["audio"]],
                   lumas=[(t, v, n, y) for (t, v, n), y in zip(d["lumas"], pictures)],
                   codecs=d["codecs"], connection_states=d["connection_states"],
                   color=tuple(d["color"]) if d.get("color") else None, plis=d.get("plis", 0),
                   qps=[tuple(q) for q in d.get("qps", [])])


class LocalReceiver:
    """The round's receiver in this process."""

    def __init__(self, stack):
        from castkit.castd_proc import Receiver
        self.rx = Receiver(stack)
        self.answerer = None

    async def create(self) -> dict:
        s = await self.rx.create()
        return {"sessionId": s["sessionId"], "pin": s["pin"]}

    async def answer(self, screen_width: int, codec: str | None, keep_luma_every: float | None, prefs: dict) -> float:
        """Starts the answerer, clears the records, approves the join: the approval's time."""
        from castkit.bench import receiver
        sid = self.rx.session["sessionId"]
        self.answerer = receiver.TimecodeReceiver(self.rx.client, sid, screen_width, codec=codec,
                                                  keep_luma_every=keep_luma_every)
        await self.answerer.start()
        for record in (receiver.PACKETS, receiver.AUDIO_PACKETS, receiver.FRAMES_OUT, receiver.DECODES, receiver.QPS):
            record.clear()
        t = time.monotonic()
        await self.rx.client.api("session-approve", {"sessionId": sid, "approve": True, "streamPrefs": prefs})
        return t

    async def first_frame(self, timeout: float) -> float:
        from castkit.bench import receiver
        end = time.monotonic() + timeout
        while not self.answerer.rec.samples:
            if time.monotonic() > end:
                raise RuntimeError(f"no decoded frame within {timeout:.0f} s ({len(receiver.PACKETS)} RTP packets "
                                   f"arrived; receiver states {self.answerer.connection_states})")
            await asyncio.sleep(0.005)
        return self.answerer.rec.samples[0].decoded

    async def cpu(self) -> float:
        """This process's CPU seconds, all threads (the aiortc receiver and its decoder)."""
        return time.process_time()

    async def take(self, w0: float, w1: float) -> RoundData:
        from castkit.bench import receiver
        a = self.answerer
        return RoundData(samples=list(a.rec.samples), packets=list(receiver.PACKETS),
                         audio_packets=list(receiver.AUDIO_PACKETS), frames_out=list(receiver.FRAMES_OUT),
                         decodes=list(receiver.DECODES), audio=list(a.rec.audio),
                         lumas=[q for q in a.rec.lumas if w0 <= q[0] <= w1], codecs=list(a.codecs),
                         connection_states=list(a.connection_states), color=a.rec.color,
                         plis=sum(1 for _, kind in a.keyframes.requests if kind == "pli"),
                         qps=list(receiver.QPS))

    async def close(self) -> None:
        if self.answerer:
            await self.answerer.close()
        await self.rx.client.close()


class RemoteReceiver:
    """A LocalReceiver in its own process in namespace `ns` (see the module's text)."""

    def __init__(self, proc):
        self.p = proc      # rxproc.ReceiverProc

    @classmethod
    async def start(cls, ns: str, stack, forward_to: str, logf, accept_high: bool = False) -> "RemoteReceiver":
        """The process in `ns`, reaching the stack (which listens on every address) at `forward_to`."""
        import os
        from pathlib import Path
        from castkit.confine import CONFINED_ENV, confined_env_value
        from castkit.rxproc import ReceiverProc
        at = lambda url: f"http://{forward_to}:{url.rsplit(':', 1)[1]}"  # noqa: E731 (the stack listens on 0.0.0.0)
        cfg = {"api_url": at(stack.api_url), "supabase_url": at(stack.supabase_url), "key": stack.key,
               "accept_high": accept_high}
        env = dict(os.environ, **{CONFINED_ENV: confined_env_value(ns)})
        return cls(await ReceiverProc.spawn(["ip", "netns", "exec", ns], cfg, logf, env=env,
                                            script=Path(__file__), limit=1 << 28))

    async def _cmd(self, wait: float = 90, **msg) -> dict:
        return await self.p.call(wait, **msg)

    async def create(self) -> dict:
        return await self._cmd(cmd="create")

    async def answer(self, screen_width: int, codec: str | None, keep_luma_every: float | None, prefs: dict) -> float:
        return (await self._cmd(cmd="answer", screen_width=screen_width, codec=codec,
                                keep_luma_every=keep_luma_every, prefs=prefs))["t_approve"]

    async def first_frame(self, timeout: float) -> float:
        return (await self._cmd(wait=timeout + 30, cmd="first_frame", within=timeout))["t_first"]

    async def cpu(self) -> float:
        return (await self._cmd(cmd="cpu"))["cpu"]

    async def take(self, w0: float, w1: float) -> RoundData:
        import tempfile
        from pathlib import Path
        with tempfile.TemporaryDirectory(prefix="castd-bench-rx-") as d:
            f = Path(d) / "lumas.npz"
            got = await self._cmd(wait=180, cmd="take", w0=w0, w1=w1, lumas=str(f))
            pictures = []
            if f.exists():
                with np.load(f) as z:
                    pictures = [z[f"y{i}"] for i in range(len(z.files))]
        return RoundData.from_json(got, pictures)

    async def close(self) -> None:
        await self._cmd(cmd="close")

    async def quit(self) -> None:
        await self.p.close(timeout=20)


async def _serve(cfg: dict) -> None:
    stack = SimpleNamespace(api_url=cfg["api_url"], supabase_url=cfg["supabase_url"], key=cfg["key"])
    rx: LocalReceiver | None = None

    def out(obj: dict) -> None:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    try:
        while line := await reader.readline():
            msg = json.loads(line)
            cmd = msg.pop("cmd", None)
            if cmd == "quit":
                break
            try:   # any failure is answered: the bench reports it and goes on with the next round
                if cmd == "create":
                    if rx:
                        await rx.close()
                    rx = LocalReceiver(stack)
                    out(await rx.create())
                elif cmd == "answer":
                    out({"t_approve": await rx.answer(**msg)})
                elif cmd == "first_frame":
                    out({"t_first": await rx.first_frame(msg["within"])})
                elif cmd == "cpu":
                    out({"cpu": await rx.cpu() if rx else time.process_time()})
                elif cmd == "take":
                    data = await rx.take(msg["w0"], msg["w1"])
                    if data.lumas:
                        np.savez(msg["lumas"], **{f"y{i}": q[3] for i, q in enumerate(data.lumas)})
                    out(data.to_json())
                elif cmd == "close":
                    if rx:
                        await rx.close()
                    rx = None
                    out({"ok": True})
                else:
                    out({"error": f"unknown cmd {cmd}"})
            except Exception as e:  # noqa: BLE001 (answered, logged, and the loop goes on)
                print(f"round_rx: {cmd}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
                out({"error": f"{type(e).__name__}: {e}"})
    finally:
        if rx:
            with contextlib.suppress(Exception):
                await rx.close()


def main() -> None:
    cfg = json.loads(sys.argv[1])
    from castkit.bench import receiver
    with receiver.accepting_h264_high() if cfg.get("accept_high") else contextlib.nullcontext():
        asyncio.run(_serve(cfg))


if __name__ == "__main__":
    main()
