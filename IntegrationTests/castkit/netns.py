"""Network namespaces for tests (root only): create/remove them, open sockets inside one
from this process, and run tunrouter.py between two of them.

    with Netns() as a, Netns() as b, RouterProc(a.name, b.name, delay_ms=20) as r:
        with a.entered():
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)   # lives in namespace a
        r.control(cmd="cut")
"""
from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

from . import tunrouter

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


class Netns:
    def __init__(self, prefix: str = "castd-t"):
        self.name = f"{prefix}-{secrets.token_hex(3)}"

    def __enter__(self) -> "Netns":
        subprocess.run(["ip", "netns", "add", self.name], check=True)
        self.sh("ip", "link", "set", "lo", "up")
        return self

    def __exit__(self, *exc) -> None:
        subprocess.run(["ip", "netns", "del", self.name], check=False)

    def sh(self, *args: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(["ip", "netns", "exec", self.name, *args], check=check, **kw)

    def cmd(self, *args: str) -> list[str]:
        return ["ip", "netns", "exec", self.name, *args]

    @contextlib.contextmanager
    def entered(self):
        """This thread in the namespace while the block runs: sockets created there stay in it."""
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        target = os.open(f"/var/run/netns/{self.name}", os.O_RDONLY)
        try:
            _setns(target)
            yield
        finally:
            _setns(own)
            os.close(own)
            os.close(target)


class RouterProc:
    """tunrouter.py as a subprocess; options as keyword arguments (delay_ms=20, burst="0.01,0.19")."""

    def __init__(self, ns_a: str, ns_b: str, addr_a="10.77.0.1", addr_b="10.77.0.2", **options):
        self.ns_a, self.ns_b, self.addr_a, self.addr_b = ns_a, ns_b, addr_a, addr_b
        self.options = options
        self.sock = os.path.join(tempfile.mkdtemp(prefix="tunrouter-"), "control.sock")
        self.proc: subprocess.Popen | None = None
        self.info: dict = {}

    def __enter__(self) -> "RouterProc":
        args = [sys.executable, str(Path(tunrouter.__file__)), "--ns-a", self.ns_a, "--ns-b", self.ns_b,
                "--addr-a", self.addr_a, "--addr-b", self.addr_b, "--control", self.sock]
        for k, v in self.options.items():
            args += [f"--{k.replace('_', '-')}", str(v)]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("READY "):
            self.proc.kill()
            raise RuntimeError(f"tunrouter did not start: {line!r}")
        self.info = json.loads(line[6:])
        return self

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def control(self, **msg) -> dict:
        return tunrouter.control(self.sock, **msg)

    def stats(self) -> dict:
        return self.control(cmd="stats")["stats"]
