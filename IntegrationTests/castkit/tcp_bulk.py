"""A bulk TCP download that shares a bottleneck with a cast (Scripts/bench --bottleneck, the
*-tcp-* scenarios): one connection sending as fast as TCP lets it, with the congestion control
asked for (cubic, Linux's default and the loss-based kind; bbr, the model-based kind), and a
receiver counting what arrives.

    python tcp_bulk.py serve HOST PORT OUT.json    # accepts one connection; on SIGTERM writes
                                                   # [[time.monotonic(), bytes], …] per 100 ms to OUT.json
    python tcp_bulk.py send HOST PORT cubic|bbr    # sends until SIGTERM
    python tcp_bulk.py measure NS_R ADDR_R CC S    # a flow alone for S seconds (from the sender's
                                                   # namespace): its goodput after 2 s, Mbit/s

    flow = BulkFlow(ns_receiver, receiver_address, cc="cubic"); await flow.start(); …; series = await flow.stop()
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

CHUNK = 1 << 16
BIN_S = 0.1


def serve(host: str, port: int, out: str) -> None:
    bins: dict[int, int] = {}
    stop = False

    def end(*_):
        nonlocal stop
        stop = True
    signal.signal(signal.SIGTERM, end)
    with socket.create_server((host, port)) as srv:
        print("listening", flush=True)
        srv.settimeout(0.5)
        conn = None
        while conn is None and not stop:
            try:
                conn, _ = srv.accept()
            except socket.timeout:
                continue
        if conn:
            conn.settimeout(0.5)
            while not stop:
                try:
                    n = len(conn.recv(CHUNK))
                except socket.timeout:
                    continue
                except OSError:
                    break
                if n == 0:
                    break
                k = int(time.monotonic() / BIN_S)
                bins[k] = bins.get(k, 0) + n
            conn.close()
    Path(out).write_text(json.dumps([[k * BIN_S, n] for k, n in sorted(bins.items())]))


def send(host: str, port: int, cc: str) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    s.connect((host, port))
    chunk = os.urandom(CHUNK)
    try:
        while True:
            s.sendall(chunk)
    except (OSError, KeyboardInterrupt):
        pass


class BulkFlow:
    """The receiver in namespace `ns_r` (listening on `addr_r`), the sender in this process's
    namespace; `stop()` returns the receiver's series [[t, bytes], …] (t: time.monotonic())."""

    def __init__(self, ns_r: str, addr_r: str, cc: str = "cubic", port: int = 5201):
        self.ns_r, self.addr_r, self.cc, self.port = ns_r, addr_r, cc, port
        self.out = Path(f"/tmp/castd-tcp-bulk-{os.getpid()}-{port}.json")
        self.rx = self.tx = None

    async def start(self) -> None:
        from castkit.paths import PYTHON
        self.rx = await asyncio.create_subprocess_exec("ip", "netns", "exec", self.ns_r, PYTHON, __file__, "serve",
                                                       self.addr_r, str(self.port), str(self.out),
                                                       stdout=asyncio.subprocess.PIPE)
        line = await asyncio.wait_for(self.rx.stdout.readline(), 10)
        if b"listening" not in line:
            raise RuntimeError("the bulk TCP receiver did not start")
        self.tx = await asyncio.create_subprocess_exec(PYTHON, __file__, "send", self.addr_r, str(self.port), self.cc)

    async def stop(self) -> list[list[float]]:
        for p in (self.tx, self.rx):
            if p and p.returncode is None:
                p.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(p.wait(), 5)
                except asyncio.TimeoutError:
                    p.kill()
                    await p.wait()
        series = json.loads(self.out.read_text()) if self.out.exists() else []
        self.out.unlink(missing_ok=True)
        return series


def mbps(series: list[list[float]], t0: float, t1: float) -> float:
    """Mean goodput over [t0, t1) in Mbit/s."""
    return sum(n for t, n in series if t0 <= t < t1) * 8 / max(1e-9, t1 - t0) / 1e6


async def measure(ns_r: str, addr_r: str, cc: str, seconds: float, skip: float) -> float:
    """A flow alone for `seconds`: its goodput after the first `skip` seconds, Mbit/s."""
    flow = BulkFlow(ns_r, addr_r, cc)
    await flow.start()
    t0 = time.monotonic()
    await asyncio.sleep(seconds)
    t1 = time.monotonic()
    return mbps(await flow.stop(), t0 + skip, t1)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "serve":
        serve(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif cmd == "send":
        send(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif cmd == "measure":
        print(json.dumps(asyncio.run(measure(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]), 2.0))))
    else:
        sys.exit(f"usage: {sys.argv[0]} serve HOST PORT OUT | send HOST PORT CC | measure NS_R ADDR_R CC SECONDS")
