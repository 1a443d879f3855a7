"""castkit/tunrouter.py, the userspace delay router of the fault scenarios, against real traffic
between two network namespaces: delay, jitter and order, random and burst loss with a fixed
seed, reordering, cut and restore at run time, and a 4 Mbit/s stream carried whole."""
import os
import re
import socket
import statistics
import struct
import threading
import time

import pytest

from castkit.netns import Netns, RouterProc

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (CI runs as root)")

A, B = "10.77.0.1", "10.77.0.2"


def udp_pair(na: Netns, nb: Netns):
    with na.entered():
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        tx.bind((A, 0))
    with nb.entered():
        rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        rx.bind((B, 0))
    rx.settimeout(0.5)
    return tx, rx


def wait_for(read, done, timeout: float = 5.0):
    """read() until done(value) holds (or `timeout` seconds pass); returns the last value read."""
    deadline = time.monotonic() + timeout
    value = read()
    while not done(value) and time.monotonic() < deadline:
        time.sleep(0.01)
        value = read()
    return value


def send_numbered(tx, rx, n: int, size: int = 200, pps: float = 2000) -> list[int]:
    """Send n datagrams carrying their index, paced at pps; return the indexes received, in arrival order."""
    dst = rx.getsockname()
    pad = b"x" * (size - 4)
    t0 = time.monotonic()
    got = []
    rx.setblocking(False)
    for i in range(n):
        tx.sendto(b"N" + struct.pack("!I", i) + pad[1:], dst)
        while time.monotonic() < t0 + (i + 1) / pps:
            try:
                got.append(struct.unpack("!I", rx.recv(2048)[1:5])[0])
            except BlockingIOError:
                time.sleep(0.0002)
    rx.settimeout(0.5)
    try:
        while True:
            got.append(struct.unpack("!I", rx.recv(2048)[1:5])[0])
    except (socket.timeout, BlockingIOError):
        pass
    return got


def test_udp_echo_rtt_is_twice_the_configured_delay():
    with Netns() as na, Netns() as nb, RouterProc(na.name, nb.name, delay_ms=30):
        tx, rx = udp_pair(na, nb)
        echo = threading.Thread(target=lambda: [rx.sendto(*rx.recvfrom(2048)) for _ in range(10)], daemon=True)
        echo.start()
        tx.settimeout(2)
        rtts = []
        for i in range(10):
            t0 = time.monotonic()
            tx.sendto(struct.pack("!I", i), rx.getsockname())
            assert tx.recv(2048) == struct.pack("!I", i)
            rtts.append((time.monotonic() - t0) * 1000)
            time.sleep(0.05)
    # Never faster than the configured delay; the median within a loaded machine's slack of it.
    assert min(rtts) >= 60.0, rtts
    assert statistics.median(rtts) < 60.0 + 25.0, rtts


def test_random_loss_ratio_is_within_binomial_bounds_and_matches_the_router_counters():
    n, p = 4000, 0.1
    with Netns() as na, Netns() as nb, RouterProc(na.name, nb.name, loss=p, seed=7) as r:
        tx, rx = udp_pair(na, nb)
        got = send_numbered(tx, rx, n)
        st = r.stats()["a->b"]
    lost = n - len(set(got))
    sd = (n * p * (1 - p)) ** 0.5
    assert abs(lost - n * p) < 4.5 * sd, (lost, n * p)
    assert st["lost_random"] == lost and st["forwarded"] == len(got)


def test_the_same_seed_loses_the_same_packets():
    runs = []
    for _ in range(2):
        with Netns() as na, Netns() as nb, RouterProc(na.name, nb.name, loss=0.2, seed=11):
            tx, rx = udp_pair(na, nb)
            runs.append(sorted(send_numbered(tx, rx, 500, pps=1000)))
    assert runs[0] == runs[1] and len(runs[0]) < 480


def loss_runs(received: list[int], n: int) -> list[int]:
    have = set(received)
    runs, cur = [], 0
    for i in range(n):
        if i in have:
            if cur:
                runs.append(cur)
            cur = 0
        else:
            cur += 1
    if cur:
        runs.append(cur)
    return runs


def test_gilbert_elliott_loss_comes_in_bursts_at_the_configured_mean():
    n, p_gb, r_bg = 6000, 0.01, 0.19        # mean loss p/(p+r) = 5 %, mean burst 1/r ≈ 5.3 packets
    with Netns() as na, Netns() as nb, RouterProc(na.name, nb.name, burst=f"{p_gb},{r_bg}", seed=3) as r:
        tx, rx = udp_pair(na, nb)
        got = send_numbered(tx, rx, n, pps=3000)
        st = r.stats()["a->b"]
    runs = loss_runs(got, n)
    lost = sum(runs)
    assert st["lost_burst"] == lost
    assert 0.025 < lost / n < 0.08, lost / n
    # Random loss at 5 % has a mean run of ≈1.05 packets; these bursts average several.
    assert statistics.mean(runs) > 3.0, runs


def test_jitter_keeps_order_and_reorder_breaks_it():
    with Netns() as na, Netns() as nb, RouterProc(na.name, nb.name, delay_ms=20, jitter_ms=10, seed=5):
        tx, rx = udp_pair(na, nb)
        got = send_numbered(tx, rx, 600, pps=1000)
    assert got == sorted(got) and len(got) == 600
    with Netns() as na, Netns() as nb, RouterProc(na.name, nb.name, delay_ms=5, reorder=0.1, reorder_gap_ms=15,
                                                  seed=5):
        tx, rx = udp_pair(na, nb)
        got = send_numbered(tx, rx, 600, pps=1000)
    assert sorted(got) == list(range(600))
    late = sum(1 for a, b in zip(got, got[1:]) if b < a)
    assert 20 < late < 120, late


def test_cut_drops_everything_until_restore():
    with Netns() as na, Netns() as nb, RouterProc(na.name, nb.name, delay_ms=5) as r:
        tx, rx = udp_pair(na, nb)
        assert len(send_numbered(tx, rx, 50, pps=500)) == 50
        assert r.control(cmd="cut") == {"ok": True}
        assert send_numbered(tx, rx, 50, pps=500) == []
        # The signal works too: SIGUSR2 restores.
        r.proc.send_signal(__import__("signal").SIGUSR2)
        deadline = time.monotonic() + 5
        while r.stats()["cut"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(send_numbered(tx, rx, 50, pps=500)) == 50
        st = r.stats()["a->b"]
    assert st["lost_cut"] == 50 and st["forwarded"] == 100


def test_set_changes_the_impairment_at_run_time_and_stats_classify_udp_payloads():
    with Netns() as na, Netns() as nb, RouterProc(na.name, nb.name) as r:
        tx, rx = udp_pair(na, nb)
        assert r.control(cmd="set", loss=1.0) == {"ok": True}
        assert send_numbered(tx, rx, 20) == []
        r.control(cmd="set", loss=0)
        dst = rx.getsockname()
        tx.sendto(b"\x00\x01" + b"\0" * 18, dst)           # STUN binding request type
        tx.sendto(b"\x16\xfe\xfd" + b"\0" * 20, dst)       # DTLS handshake
        tx.sendto(b"\x80\x60" + b"\0" * 20, dst)           # RTP, payload type 96
        tx.sendto(b"\x81\xc8" + b"\0" * 20, dst)           # RTCP sender report
        # All four arrive (the router saw them), then its counters are read once each class
        # shows a packet: a condition, not a fixed pause.
        assert len([rx.recv(2048) for _ in range(4)]) == 4
        cl = wait_for(lambda: r.stats()["a->b"]["classes"],
                      lambda c: all(c[k]["packets"] >= 1 for k in ("stun", "dtls", "rtp", "rtcp")))
        assert r.control(cmd="bogus")["ok"] is False
    assert (cl["stun"]["packets"], cl["dtls"]["packets"], cl["rtp"]["packets"], cl["rtcp"]["packets"]) == (1, 1, 1, 1)


def test_drop_class_drops_one_payload_class_in_one_direction_only():
    stun, rtp = b"\x01\x01" + b"\0" * 18, b"\x80\x60" + b"\0" * 20     # a binding success; RTP
    with Netns() as na, Netns() as nb, RouterProc(na.name, nb.name) as r:
        tx, rx = udp_pair(na, nb)
        assert r.control(cmd="set", drop_class="rtp", drop_dir="sideways")["ok"] is False
        assert r.control(cmd="set", drop_class="video")["ok"] is False
        assert r.control(cmd="set", drop_class="stun", drop_dir="b->a") == {"ok": True}
        a_addr, b_addr = tx.getsockname(), rx.getsockname()
        tx.settimeout(0.5)
        # b→a: STUN is dropped, RTP passes; a→b: both pass.
        for _ in range(5):
            rx.sendto(stun, a_addr)
            rx.sendto(rtp, a_addr)
            tx.sendto(stun, b_addr)
            tx.sendto(rtp, b_addr)
        at_a, at_b = [], []
        for sock, into in ((tx, at_a), (rx, at_b)):
            try:
                while True:
                    into.append(sock.recv(2048))
            except (socket.timeout, BlockingIOError):
                pass
        st = r.stats()
        # Back to forwarding everything.
        assert r.control(cmd="set", drop_class=None) == {"ok": True}
        rx.sendto(stun, a_addr)
        assert tx.recv(2048) == stun
    assert sorted(at_a) == [rtp] * 5
    assert sorted(at_b) == sorted([stun] * 5 + [rtp] * 5)
    assert st["b->a"]["lost_class"] == 5 and st["a->b"]["lost_class"] == 0
    assert st["b->a"]["classes"]["stun"]["packets"] == 5 and st["b->a"]["forwarded"] == 5


def test_carries_a_4_mbps_stream_with_delay_without_loss():
    # 4 Mbit/s as 1200-byte datagrams for 3 s: ≈ 417 packets/s.
    n, size = 1250, 1200
    with Netns() as na, Netns() as nb, RouterProc(na.name, nb.name, delay_ms=20, jitter_ms=5) as r:
        tx, rx = udp_pair(na, nb)
        got = send_numbered(tx, rx, n, size=size, pps=n / 3)
        st = r.stats()["a->b"]
    assert len(got) == n and st["write_errors"] == 0
