"""A real bottleneck between two network namespaces (root only): a veth pair whose
sender → receiver egress has a token-bucket filter (tc tbf), and optional random loss on
that direction (nftables `numgen random`). tbf exists in this kernel; netem, fq_codel and
cake do not, so delay comes only from tbf's own queue (base RTT ~1 ms on a veth).

    with BottleneckLink() as link:          # namespaces link.ns_s (sender) and link.ns_r
        link.set_rate(2000)                 # 2 Mbit/s, a 200 ms queue
        link.set_rate(1500)                 # `tc qdisc change`: the queue stays
        link.set_loss(0.02)                 # 2 % of UDP towards the receiver dropped
        link.set_rate(None)                 # free link (no qdisc)
        link.backlog()                      # tbf's queue now: {"bytes", "packets", "drops", …}

Addresses are inside 10.79.0.0/16 on the veth only; neither namespace has a default route,
so nothing can leave the machine.
"""
from __future__ import annotations

import re
import secrets
import subprocess

LATENCY_MS = 200           # tbf's queue bound: a 200 ms queue at the configured rate
MIN_BURST = 5000           # bytes: ~3 full packets, the bucket depth at low rates
HZ = 250                   # tbf needs burst ≥ rate / HZ (tc-tbf(8)); 250 is Debian's CONFIG_HZ


def sh(*args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=check, capture_output=True, text=True, input=input)


def burst_bytes(rate_kbit: float) -> int:
    """The bucket: at least MIN_BURST, and at least 1.25 × one timer tick of the rate."""
    return max(MIN_BURST, int(rate_kbit * 1000 / 8 / HZ * 1.25))


def tbf_args(rate_kbit: float) -> list[str]:
    return ["tbf", "rate", f"{int(rate_kbit)}kbit", "burst", str(burst_bytes(rate_kbit)),
            "latency", f"{LATENCY_MS}ms"]


class BottleneckLink:
    def __init__(self, tag: str | None = None, subnet: int | None = None):
        tag = tag or secrets.token_hex(2)
        self.tag = tag
        self.ns_s, self.ns_r = f"castd-bs-{tag}", f"castd-br-{tag}"
        self.dev_s, self.dev_r = f"bs{tag}", f"br{tag}"
        n = subnet if subnet is not None else int(tag, 16) % 250 + 1
        self.addr_s, self.addr_r = f"10.79.{n}.1", f"10.79.{n}.2"
        self.rate_kbit: float | None = None
        self.loss = 0.0

    # -- life cycle --------------------------------------------------------------

    def up(self) -> "BottleneckLink":
        try:
            for ns in (self.ns_s, self.ns_r):
                sh("ip", "netns", "add", ns)
                sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "link", "add", self.dev_s, "netns", self.ns_s, "type", "veth", "peer", "name", self.dev_r,
               "netns", self.ns_r)
            for ns, dev, addr in ((self.ns_s, self.dev_s, self.addr_s), (self.ns_r, self.dev_r, self.addr_r)):
                sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
                # No offloads: tbf must see real packets, not 64 KB GSO super-packets.
                sh("ip", "netns", "exec", ns, "ethtool", "-K", dev, "gso", "off", "tso", "off", "gro", "off",
                   check=False)
                sh("ip", "-n", ns, "link", "set", dev, "up")
        except subprocess.CalledProcessError as e:
            self.down()
            raise RuntimeError(f"bottleneck link setup failed: {' '.join(e.cmd)}: {e.stderr.strip()}") from e
        return self

    def down(self) -> None:
        for ns in (self.ns_s, self.ns_r):
            for p in sh("ip", "netns", "pids", ns, check=False).stdout.split():
                sh("kill", "-9", p, check=False)
            sh("ip", "netns", "del", ns, check=False)

    def __enter__(self) -> "BottleneckLink":
        return self.up()

    def __exit__(self, *exc) -> None:
        self.down()

    def exists(self) -> bool:
        names = sh("ip", "netns", "list", check=False).stdout
        return any(line.split()[0] in (self.ns_s, self.ns_r) for line in names.splitlines() if line.strip())

    # -- impairments (sender → receiver only) ------------------------------------

    def set_rate(self, rate_kbit: float | None) -> None:
        """tbf at rate_kbit on the sender's egress (added, or changed in place so the queue
        stays), or no qdisc at all for None."""
        base = ["ip", "netns", "exec", self.ns_s, "tc", "qdisc"]
        if rate_kbit is None:
            if self.rate_kbit is not None:
                sh(*base, "del", "dev", self.dev_s, "root", check=False)
        elif self.rate_kbit is None:
            sh(*base, "add", "dev", self.dev_s, "root", *tbf_args(rate_kbit))
        else:
            sh(*base, "change", "dev", self.dev_s, "root", *tbf_args(rate_kbit))
        self.rate_kbit = rate_kbit

    def set_loss(self, fraction: float) -> None:
        """Random loss of UDP towards the receiver (nftables numgen: independent per packet)."""
        sh("ip", "netns", "exec", self.ns_s, "nft", "delete", "table", "inet", "bottleneck", check=False)
        self.loss = fraction
        if fraction <= 0:
            return
        per_10k = int(round(fraction * 10000))
        rules = ("table inet bottleneck {\n"
                 "  counter dropped { }\n"
                 "  chain out { type filter hook output priority 0;\n"
                 f'    oifname "{self.dev_s}" meta l4proto udp numgen random mod 10000 < {per_10k} counter name dropped drop\n'
                 "  }\n}\n")
        sh("ip", "netns", "exec", self.ns_s, "nft", "-f", "-", input=rules)

    def loss_dropped(self) -> int:
        r = sh("ip", "netns", "exec", self.ns_s, "nft", "list", "counter", "inet", "bottleneck", "dropped",
               check=False)
        m = re.search(r"packets (\d+)", r.stdout)
        return int(m.group(1)) if m else 0

    def backlog(self) -> dict:
        """tbf's statistics now: bytes and packets queued, drops and bytes sent so far."""
        out = sh("ip", "netns", "exec", self.ns_s, "tc", "-s", "qdisc", "show", "dev", self.dev_s, check=False).stdout
        return parse_tc_stats(out)


def _size(num: str, unit: str) -> int:
    mult = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000_000, "mb": 1000_000}.get(unit.lower(), 1)
    return int(float(num) * mult)


def parse_tc_stats(text: str) -> dict:
    """`tc -s qdisc show` of one device → {"qdisc", "sent_bytes", "sent_packets", "drops",
    "backlog_bytes", "backlog_packets"} (zeros where absent)."""
    out = {"qdisc": None, "sent_bytes": 0, "sent_packets": 0, "drops": 0, "backlog_bytes": 0, "backlog_packets": 0}
    m = re.search(r"qdisc (\w+)", text)
    if m:
        out["qdisc"] = m.group(1)
    m = re.search(r"Sent (\d+) bytes (\d+) pkt \(dropped (\d+)", text)
    if m:
        out["sent_bytes"], out["sent_packets"], out["drops"] = (int(x) for x in m.groups())
    m = re.search(r"backlog (\d+(?:\.\d+)?)([KkMm]?b?) (\d+)p", text)
    if m:
        out["backlog_bytes"] = _size(m.group(1), m.group(2))
        out["backlog_packets"] = int(m.group(3))
    return out
