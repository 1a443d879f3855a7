"""Running a test's processes where their multicast cannot leave the machine, and proving it.

Chromium with its mDNS host candidates on announces `<uuid>.local` names to 224.0.0.251:5353
and ff02::fb on every non-loopback interface, and castd sends its queries there too; in the
machine's own network namespace that is the real network. `Confinement` gives such a run:

- namespace A (the run): loopback up, and one end of a veth pair with 10.99.7.1/24 and the
  default route (Chromium ignores loopback interfaces for ICE, so it needs a real one);
  namespace B holds the other end (10.99.7.2) and nothing else, no forwarding: whatever A
  sends out of the veth stops there;
- a cgroup (v2) that every process of the run belongs to (`run` puts the child in before it
  execs, its descendants inherit it);
- the guard, an nftables table in the machine's (root) namespace counting what leaves through
  a non-loopback interface: every packet sent from a socket of that cgroup (output hook: the
  socket match works there only), and, whoever sent them, packets to the mDNS groups
  224.0.0.251 / ff02::fb and IGMP / MLD membership reports (postrouting; the kernel sends those
  when a socket joins a group, from no socket of the run);
- the positive control, the same table in namespace A on its veth: it shows what the run did
  send (mDNS, group joins), so zero in the root namespace means confined, not silent.

`Guard` alone (a cgroup and that table in the current namespace) is what castkit/chromium.py
puts every browser in when it runs in the machine's namespace.

    with Confinement() as c:
        r = c.run([sys.executable, "script.py"], timeout=100)
        counts = c.counters()   # {"root": {...}, "inside": {...}}

Needs root, iproute2, nftables and cgroup2. `confined()` tells a process whether it runs inside
such a run (what castkit/chromium.py checks before hiding addresses).
"""
from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

INSIDE_ADDRESS = "10.99.7.1"
PEER_ADDRESS = "10.99.7.2"
CGROUP_ROOT = Path("/sys/fs/cgroup")
CONFINED_ENV = "CASTD_CONFINED_NETNS"


def confined() -> bool:
    """True in a process that a Confinement started (or its descendants), in its namespace A,
    or that Scripts/faults started in its receiver namespace (no route off the machine, the
    whole run in a Guard's cgroup). (PID 1's namespace is not readable here, so the run names
    its namespace in the environment and this checks that the process really is in it.)"""
    want = os.environ.get(CONFINED_ENV)
    try:
        return bool(want) and os.readlink("/proc/self/ns/net") == want
    except OSError:
        return False


def _cgroup2_mount() -> Path:
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            return Path(fields[1])
    raise RuntimeError("no cgroup2 file system is mounted; the off-machine guard needs one")


def _sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, check=check)


def confined_env_value(netns: str) -> str:
    """What CONFINED_ENV holds for processes of a run confined to the named namespace."""
    return f"net:[{os.stat(f'/run/netns/{netns}').st_ino}]"


def _nsenter(netns: str | None) -> list[str]:
    """The prefix that runs a command in a network namespace: None is this one, a name is
    one of /run/netns, a path (e.g. /proc/<pid>/ns/net) is that process's.
    nsenter keeps this mount namespace (ip netns exec would remount /sys and hide the cgroup)."""
    if not netns:
        return []
    return ["nsenter", f"--net={netns if netns.startswith('/') else f'/run/netns/{netns}'}"]


def read_counters(table: str, netns: str | None = None) -> dict[str, int]:
    """The counters of a guard's table (see Guard.counters) by its name: also from a process
    that did not make the guard, e.g. in another namespace (netns as in _nsenter)."""
    r = _sh(*_nsenter(netns), "nft", "-j", "list", "table", "inet", table)
    counts = {}
    for item in json.loads(r.stdout)["nftables"]:
        rule = item.get("rule")
        if rule:
            counts[rule.get("comment", "?")] = next(
                (e["counter"]["packets"] for e in rule["expr"] if "counter" in e), 0)
    return counts


class Guard:
    """A cgroup for the processes watched, and an nftables table (in this network namespace,
    and in any other `add_namespace` names) counting what leaves through a non-loopback
    interface; see `counters`. Needs root and cgroup2."""

    def __init__(self, tag: str | None = None):
        if os.geteuid() != 0:
            raise PermissionError("the off-machine guard makes a cgroup and an nftables table: needs root")
        tag = tag or secrets.token_hex(3)
        self.table = f"castd_guard_{tag}"
        mount = _cgroup2_mount()
        self.cgroup = mount / f"castd-guard-{tag}"
        # nft names a cgroup by its path below /sys/fs/cgroup and its depth in the v2 hierarchy.
        try:
            self.cgroup_name = str(self.cgroup.relative_to(CGROUP_ROOT))
        except ValueError:
            raise RuntimeError(f"cgroup2 is mounted at {mount}, outside {CGROUP_ROOT}: nft cannot name it")
        self.namespaces: list[str | None] = []
        self.cgroup.mkdir(mode=0o755)
        try:
            self.add_namespace(None)
        except BaseException:
            self.close()
            raise

    def add_namespace(self, netns: str | None) -> None:
        """The same table in a named network namespace (None: this one)."""
        not_lo = 'oifname != "lo"'
        # The socket match works on output only (locally sent packets, which is what the
        # watched processes send); postrouting also sees what is routed through.
        script = f"""table inet {self.table} {{
  chain out {{
    type filter hook output priority 0; policy accept;
    socket cgroupv2 level 1 "{self.cgroup_name}" {not_lo} counter comment "run_any"
  }}
  chain post {{
    type filter hook postrouting priority 0; policy accept;
    {not_lo} ip daddr 224.0.0.251 counter comment "mdns_v4"
    {not_lo} ip6 daddr ff02::fb counter comment "mdns_v6"
    {not_lo} meta l4proto igmp counter comment "igmp"
    {not_lo} icmpv6 type {{ mld-listener-report, mld2-listener-report }} counter comment "mld"
  }}
}}
"""
        r = subprocess.run(_nsenter(netns) + ["nft", "-f", "-"], input=script, text=True, capture_output=True)
        if r.returncode != 0:
            raise RuntimeError(f"nft refused the guard table: {r.stderr.strip()}")
        self.namespaces.append(netns)

    def join(self) -> None:
        """Puts the calling process in the cgroup (a preexec_fn: children inherit it)."""
        (self.cgroup / "cgroup.procs").write_text(str(os.getpid()))

    def counters(self, netns: str | None = None) -> dict[str, int]:
        """Packets through a non-loopback interface of that namespace: run_any (sent from a
        socket of the cgroup's processes), and whoever sent them: mdns_v4, mdns_v6 (to the mDNS
        groups), igmp, mld (group membership reports, which the kernel sends when a socket joins)."""
        return read_counters(self.table, netns)

    def processes(self) -> list[int]:
        try:
            return [int(p) for p in (self.cgroup / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def close(self) -> None:
        """Ends processes left in the cgroup (started by the watched run, by pid), removes it
        and the tables (a namespace already deleted took its table along)."""
        for pid in self.processes():
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        for netns in self.namespaces:
            _sh(*_nsenter(netns), "nft", "delete", "table", "inet", self.table, check=False)
        self.namespaces.clear()
        for _ in range(50):
            try:
                self.cgroup.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)


class Confinement:
    def __init__(self):
        if os.geteuid() != 0:
            raise PermissionError("a confined run creates network namespaces, a cgroup and nftables tables: needs root")
        tag = secrets.token_hex(3)
        self.tag = tag
        self.ns, self.peer_ns = f"castd-mc-{tag}", f"castd-mcp-{tag}"
        self.veth, self.peer_veth = f"mc{tag}a", f"mc{tag}b"
        self.guard: Guard | None = None
        self._namespaces: list[str] = []

    def __enter__(self) -> "Confinement":
        try:
            self._setup()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _setup(self) -> None:
        self.guard = Guard(self.tag)
        for ns in (self.ns, self.peer_ns):
            _sh("ip", "netns", "add", ns)
            self._namespaces.append(ns)
        _sh("ip", "link", "add", self.veth, "netns", self.ns, "type", "veth",
            "peer", "name", self.peer_veth, "netns", self.peer_ns)
        for ns, dev, addr in ((self.ns, self.veth, INSIDE_ADDRESS), (self.peer_ns, self.peer_veth, PEER_ADDRESS)):
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
            _sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            _sh("ip", "-n", ns, "link", "set", dev, "up")
        # Chromium hiding its addresses signals no host candidate at all without a default
        # route (measured); B forwards nothing, so the route leads nowhere.
        _sh("ip", "-n", self.ns, "route", "add", "default", "via", PEER_ADDRESS)
        self.guard.add_namespace(self.ns)

    def run(self, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
        """argv in namespace A and the run's cgroup (subprocess.run keyword arguments pass through)."""
        assert self.guard
        env = dict(kwargs.pop("env", None) or os.environ)
        env[CONFINED_ENV] = confined_env_value(self.ns)
        return subprocess.run(["ip", "netns", "exec", self.ns, *argv], preexec_fn=self.guard.join, env=env, **kwargs)

    def counters(self) -> dict[str, dict[str, int]]:
        """{"root": Guard.counters() in the machine's namespace, "inside": the same in A}."""
        assert self.guard
        return {"root": self.guard.counters(), "inside": self.guard.counters(self.ns)}

    def leftover_processes(self) -> list[int]:
        return self.guard.processes() if self.guard else []

    def close(self) -> None:
        if self.guard:
            self.guard.close()
        for ns in reversed(self._namespaces):
            _sh("ip", "netns", "del", ns, check=False)
        self._namespaces.clear()


def rerun_confined(request, tmp_path: Path, timeout: float) -> dict[str, dict[str, int]]:
    """Runs the calling pytest test again, alone, in a child pytest inside a Confinement, and
    asserts that it passed and that nothing it sent left the machine. Returns the counters.
    The child sees `confined()` true and runs the test's body (with its own stack)."""
    config = request.config
    argv = [sys.executable, "-m", "pytest", "-c", str(config.inipath), "--rootdir", str(config.rootpath),
            request.node.nodeid, "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "confined"), "-q", "-s"]
    with Confinement() as c:
        r = c.run(argv, cwd=config.rootpath, capture_output=True, text=True, timeout=timeout)
        counts = c.counters()
        left = c.leftover_processes()
    out = (r.stdout + r.stderr)[-8000:]
    print(out)
    print("GUARD " + json.dumps(counts))
    assert r.returncode == 0 and "1 passed" in r.stdout, out
    assert left == [], f"processes of the confined run outlived it: {left}"
    root, inside = counts["root"], counts["inside"]
    assert root["run_any"] == 0, f"the confined run sent {root['run_any']} packets off the machine: {counts}"
    # Whoever sent it (the run's own packets are run_any): nothing on this machine may.
    assert root["mdns_v4"] == root["mdns_v6"] == 0, f"mDNS left the machine during the test: {counts}"
    return counts
