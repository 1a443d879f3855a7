#!/usr/bin/env python3
"""A userspace delay router between two network namespaces (this kernel has no netem).

It opens a TUN device in its own namespace for each side, moves one into namespace A and one
into namespace B (a TUN device keeps its file descriptor when it moves), gives them addresses
in one /24, and forwards every IP packet from one device to the other after an impairment:

  --delay-ms D        one-way delay (so RTT = 2·D)
  --jitter-ms J       uniform in [-J, +J] added to the delay; order is kept (a packet
                      never leaves before the one read before it) unless --reorder says so
  --reorder P         with probability P a packet is held --reorder-gap-ms longer than its
                      delay and the packets after it overtake it
  --loss P            independent random loss
  --burst p,r[,h[,k]] Gilbert–Elliott burst loss: good→bad with probability p per packet,
                      bad→good with r; a packet is lost with probability h in the bad state
                      (default 1) and k in the good state (default 0); mean loss = p/(p+r)·h
  --seed N            the random generators (one per direction) are seeded from N

At run time (a Unix stream socket given by --control, one JSON object per line, one JSON
answer per line):
  {"cmd":"cut"}  drop everything (both directions, queued packets too)
  {"cmd":"restore"}
  {"cmd":"set", "delay_ms":…, "jitter_ms":…, "loss":…, "burst":"p,r", "reorder":…}
  {"cmd":"set", "drop_class":"stun", "drop_dir":"b->a"}  drop every packet of one class
                  (stun, dtls, rtp, rtcp, other) in one direction ("a->b", "b->a" or
                  "both"); "drop_class": null (or "") stops dropping
  {"cmd":"stats"} counters per direction (a→b, b→a): packets read, forwarded, lost
                  (random / burst / cut), and read packets by UDP payload class
                  (stun, dtls, rtp, rtcp, other) with bytes.
SIGUSR1 cuts and SIGUSR2 restores as well. SIGTERM/SIGINT stop the router; the devices go
away with their file descriptors.

Prints one line `READY {json}` on stdout once both devices are up.

    tunrouter.py --ns-a castd --addr-a 10.77.0.1 --ns-b rx --addr-b 10.77.0.2 \
                 --delay-ms 20 --jitter-ms 10 --loss 0.05 --seed 1 --control /tmp/r.sock
"""
from __future__ import annotations

import argparse
import fcntl
import heapq
import json
import os
import random
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
CLASSES = ("stun", "dtls", "rtp", "rtcp", "other")


def open_tun(name: str) -> int:
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    return fd


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True)


def classify(pkt: bytes) -> str:
    """The class of a UDP payload as RFC 7983 demultiplexes it; 'other' for anything else."""
    if len(pkt) < 20 or pkt[0] >> 4 != 4 or pkt[9] != 17:
        return "other"
    ihl = (pkt[0] & 0x0F) * 4
    if len(pkt) < ihl + 9:
        return "other"
    b = pkt[ihl + 8]
    if b < 4:
        return "stun"
    if 20 <= b < 64:
        return "dtls"
    if 128 <= b < 192:
        pt = pkt[ihl + 9] if len(pkt) > ihl + 9 else 0
        return "rtcp" if 192 <= pt <= 223 else "rtp"
    return "other"


@dataclass
class Impairment:
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    reorder: float = 0.0
    reorder_gap_ms: float = 10.0
    loss: float = 0.0
    burst: tuple[float, float, float, float] | None = None   # p, r, h, k
    drop_class: str | None = None     # every packet of this class in drop_dir is dropped
    drop_dir: str = "both"

    def update(self, d: dict) -> None:
        if "drop_class" in d and d["drop_class"] and d["drop_class"] not in CLASSES:
            raise ValueError(f"drop_class takes one of {', '.join(CLASSES)}")
        if "drop_dir" in d and d["drop_dir"] not in ("a->b", "b->a", "both"):
            raise ValueError("drop_dir takes a->b, b->a or both")
        for k in ("delay_ms", "jitter_ms", "reorder", "reorder_gap_ms", "loss"):
            if k in d:
                setattr(self, k, float(d[k]))
        if "burst" in d:
            self.burst = parse_burst(d["burst"]) if d["burst"] else None
        if "drop_class" in d:
            self.drop_class = d["drop_class"] or None
        if "drop_dir" in d:
            self.drop_dir = d["drop_dir"]

    def drops(self, direction: str, cls: str) -> bool:
        return cls == self.drop_class and self.drop_dir in ("both", direction)


def parse_burst(text: str) -> tuple[float, float, float, float]:
    v = [float(x) for x in str(text).split(",")]
    if not 2 <= len(v) <= 4:
        raise ValueError("--burst takes p,r[,h[,k]]")
    p, r = v[0], v[1]
    h = v[2] if len(v) > 2 else 1.0
    k = v[3] if len(v) > 3 else 0.0
    return p, r, h, k


@dataclass
class Direction:
    name: str
    src: int
    dst: int
    rng: random.Random
    bad: bool = False                 # Gilbert–Elliott state
    last_due: float = 0.0
    counters: dict = field(default_factory=lambda: {"read": 0, "forwarded": 0, "lost_random": 0,
                                                    "lost_burst": 0, "lost_cut": 0, "lost_class": 0,
                                                    "write_errors": 0})
    classes: dict = field(default_factory=lambda: {c: [0, 0] for c in CLASSES})

    def decide(self, imp: Impairment, now: float) -> float | None:
        """When to forward the packet just read (monotonic seconds), or None to drop it."""
        rng = self.rng
        if imp.burst:
            p, r, h, k = imp.burst
            self.bad = (rng.random() >= r) if self.bad else (rng.random() < p)
            if rng.random() < (h if self.bad else k):
                self.counters["lost_burst"] += 1
                return None
        if imp.loss and rng.random() < imp.loss:
            self.counters["lost_random"] += 1
            return None
        delay = imp.delay_ms
        if imp.jitter_ms:
            delay += rng.uniform(-imp.jitter_ms, imp.jitter_ms)
        due = now + max(0.0, delay) / 1000.0
        if imp.reorder and rng.random() < imp.reorder:
            return due + imp.reorder_gap_ms / 1000.0       # held back; does not hold the others
        due = max(due, self.last_due)
        self.last_due = due
        return due


class Router:
    def __init__(self, fd_a: int, fd_b: int, imp: Impairment, seed: int, control: str | None):
        self.imp = imp
        self.dirs = [Direction("a->b", fd_a, fd_b, random.Random(f"{seed}/a->b")),
                     Direction("b->a", fd_b, fd_a, random.Random(f"{seed}/b->a"))]
        self.cut = False
        self.queue: list[tuple[float, int, Direction, bytes]] = []
        self.seq = 0
        self.running = True
        self.listener = None
        self.clients: dict[int, tuple[socket.socket, bytearray]] = {}
        if control:
            if os.path.exists(control):
                os.unlink(control)
            self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.listener.bind(control)
            self.listener.listen(8)
            self.listener.setblocking(False)

    def set_cut(self, cut: bool) -> None:
        self.cut = cut
        if cut:
            for _, _, d, _ in self.queue:
                d.counters["lost_cut"] += 1
            self.queue.clear()

    def stats(self) -> dict:
        return {"cut": self.cut, "queued": len(self.queue),
                **{d.name: {**d.counters, "classes": {c: {"packets": n, "bytes": b} for c, (n, b) in d.classes.items()}}
                   for d in self.dirs}}

    def command(self, msg: dict) -> dict:
        cmd = msg.get("cmd")
        if cmd == "cut":
            self.set_cut(True)
        elif cmd == "restore":
            self.set_cut(False)
        elif cmd == "set":
            try:
                self.imp.update(msg)
            except ValueError as e:
                return {"ok": False, "error": str(e)}
        elif cmd == "stats":
            return {"ok": True, "stats": self.stats()}
        elif cmd == "stop":
            self.running = False
        else:
            return {"ok": False, "error": f"unknown cmd {cmd!r}"}
        return {"ok": True}

    def _read(self, d: Direction, now: float) -> None:
        for _ in range(256):
            try:
                pkt = os.read(d.src, 65535)
            except BlockingIOError:
                return
            d.counters["read"] += 1
            cls = classify(pkt)
            c = d.classes[cls]
            c[0] += 1
            c[1] += len(pkt)
            if self.cut:
                d.counters["lost_cut"] += 1
                continue
            if self.imp.drops(d.name, cls):
                d.counters["lost_class"] += 1
                continue
            due = d.decide(self.imp, now)
            if due is None:
                continue
            if due <= now and not self.queue:
                self._write(d, pkt)
            else:
                self.seq += 1
                heapq.heappush(self.queue, (due, self.seq, d, pkt))

    def _write(self, d: Direction, pkt: bytes) -> None:
        try:
            os.write(d.dst, pkt)
            d.counters["forwarded"] += 1
        except OSError:
            d.counters["write_errors"] += 1

    def _control(self, fd: int) -> None:
        if self.listener and fd == self.listener.fileno():
            conn, _ = self.listener.accept()
            conn.setblocking(False)
            self.clients[conn.fileno()] = (conn, bytearray())
            self.poller.register(conn.fileno(), select.POLLIN)
            return
        conn, buf = self.clients[fd]
        try:
            data = conn.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.poller.unregister(fd)
            del self.clients[fd]
            conn.close()
            return
        buf += data
        while b"\n" in buf:
            line, _, rest = bytes(buf).partition(b"\n")
            buf[:] = rest
            try:
                answer = self.command(json.loads(line))
            except (ValueError, TypeError) as e:
                answer = {"ok": False, "error": str(e)}
            try:
                conn.sendall(json.dumps(answer).encode() + b"\n")
            except OSError:
                pass

    def run(self) -> None:
        self.poller = select.poll()
        by_fd = {d.src: d for d in self.dirs}
        for fd in by_fd:
            self.poller.register(fd, select.POLLIN)
        if self.listener:
            self.poller.register(self.listener.fileno(), select.POLLIN)
        while self.running:
            now = time.monotonic()
            while self.queue and self.queue[0][0] <= now:
                _, _, d, pkt = heapq.heappop(self.queue)
                self._write(d, pkt)
            timeout = max(0, (self.queue[0][0] - now) * 1000) if self.queue else 200
            try:
                events = self.poller.poll(timeout)
            except InterruptedError:
                continue
            now = time.monotonic()
            for fd, _ in events:
                if fd in by_fd:
                    self._read(by_fd[fd], now)
                else:
                    self._control(fd)


def control(path: str, **msg) -> dict:
    """Send one command to a running router and return its answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(path)
        s.sendall(json.dumps(msg).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    return json.loads(buf)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--ns-a", required=True)
    ap.add_argument("--ns-b", required=True)
    ap.add_argument("--addr-a", default="10.77.0.1")
    ap.add_argument("--addr-b", default="10.77.0.2")
    ap.add_argument("--prefix", type=int, default=24)
    ap.add_argument("--mtu", type=int, default=1500)
    ap.add_argument("--delay-ms", type=float, default=0)
    ap.add_argument("--jitter-ms", type=float, default=0)
    ap.add_argument("--reorder", type=float, default=0)
    ap.add_argument("--reorder-gap-ms", type=float, default=10)
    ap.add_argument("--loss", type=float, default=0)
    ap.add_argument("--burst", type=parse_burst, default=None)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--control")
    a = ap.parse_args(argv)

    tag = f"tr{os.getpid() % 100000}"
    fds = []
    for side, ns, addr in (("a", a.ns_a, a.addr_a), ("b", a.ns_b, a.addr_b)):
        name = tag + side
        fds.append(open_tun(name))
        ip("link", "set", "dev", name, "netns", ns)
        # IPv4 only: no link-local address, no router solicitations in the counters.
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{name}.disable_ipv6=1"],
                       check=True)
        ip("-n", ns, "link", "set", "dev", name, "mtu", str(a.mtu), "up")
        ip("-n", ns, "addr", "add", f"{addr}/{a.prefix}", "dev", name)
    imp = Impairment(a.delay_ms, a.jitter_ms, a.reorder, a.reorder_gap_ms, a.loss, a.burst)
    router = Router(fds[0], fds[1], imp, a.seed, a.control)

    def stop(*_):
        router.running = False
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGUSR1, lambda *_: router.set_cut(True))
    signal.signal(signal.SIGUSR2, lambda *_: router.set_cut(False))
    print("READY " + json.dumps({"dev_a": tag + "a", "dev_b": tag + "b", "pid": os.getpid()}), flush=True)
    router.run()
    if a.control and os.path.exists(a.control):
        os.unlink(a.control)


if __name__ == "__main__":
    main()
