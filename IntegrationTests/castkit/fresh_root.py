"""A fresh Debian 12 root (mmdebstrap --variant=apt: no Swift, no development package) to
install castd's .deb into, run it from there, and purge it.

The root is made once from the machine's configured Debian mirror (the deb822 entries of
/etc/apt/sources.list.d/debian.sources: bookworm, its updates and security, as on a person's
machine) and cached as a tarball under a state directory; each run unpacks a new copy, so
reruns take seconds and no run sees another's leftovers.

Every command runs in a mount namespace of its own (`unshare --mount --propagation private`),
where /proc, /dev, /sys, the X server sockets (/tmp/.X11-unix) and, for apt, the host's
package cache are mounted before `chroot`: the kernel drops those mounts when the command's
last process ends, however it ends, so no run can leave a mount behind on the machine.
`remove()` checks that none is visible before it deletes the copy (without crossing file
systems).

Package downloads need the machine's network: in a network namespace of a test (Scripts/faults
runs in one), `apt` commands enter the machine's namespace (FAULTS_ROOT_NETNS, else PID 1's).
Needs root, mmdebstrap, util-linux (unshare, nsenter)."""
from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from castkit.paths import REPO

SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
STATE = REPO / ".state" / "fresh-root"
APT_CACHE = STATE / "apt-archives"          # .debs downloaded into roots, kept for the next run

# Mounted in the command's own mount namespace, then chroot. $1 is the root, $2 "apt" or "run".
_ENTER = r'''set -eu
r=$1 mode=$2; shift 2
mount -t proc proc "$r/proc"
mount --rbind /dev "$r/dev"
mount --rbind /sys "$r/sys"
if [ -d /tmp/.X11-unix ]; then mkdir -p "$r/tmp/.X11-unix"; mount --bind /tmp/.X11-unix "$r/tmp/.X11-unix"; fi
if [ "$mode" = apt ]; then mount --bind "$APT_ARCHIVES" "$r/var/cache/apt/archives"; fi
exec chroot "$r" "$@"
'''

# What a command inside sees: no variable of the host but these.
BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
            "LANG": "C.UTF-8", "DEBIAN_FRONTEND": "noninteractive"}


def debian_sources(path: Path = SOURCES) -> list[str]:
    """One-line `deb` entries of the machine's deb822 sources (the Debian mirror it is configured with)."""
    lines = []
    for stanza in path.read_text().split("\n\n"):
        f: dict[str, str] = {}
        for line in stanza.splitlines():
            if line.strip() and not line.startswith("#") and ":" in line and not line.startswith(" "):
                k, v = line.split(":", 1)
                f[k.strip()] = v.strip()
        if "deb" not in f.get("Types", "").split() or "URIs" not in f:
            continue
        for uri in f["URIs"].split():
            for suite in f.get("Suites", "").split():
                lines.append(f"deb {uri} {suite} {f.get('Components', 'main')}")
    if not lines:
        raise RuntimeError(f"{path} names no Debian mirror: a fresh root needs one")
    return lines


def tarball(state: Path = STATE, suite: str = "bookworm") -> Path:
    """The cached root tarball for `suite` and the machine's sources, made with mmdebstrap if missing."""
    sources = debian_sources()
    key = hashlib.sha256("\n".join([suite, "apt", *sources]).encode()).hexdigest()[:12]
    tar = state / f"{suite}-apt-{key}.tar"
    if tar.exists():
        return tar
    state.mkdir(parents=True, exist_ok=True)
    part = tar.with_suffix(".part.tar")
    r = subprocess.run([*machine_net(), "mmdebstrap", "--variant=apt", "--quiet", suite, str(part), *sources],
                       capture_output=True, text=True)
    if r.returncode != 0:
        part.unlink(missing_ok=True)
        raise RuntimeError(f"mmdebstrap failed ({r.returncode}): {r.stderr[-1500:]}")
    part.rename(tar)
    return tar


def machine_net() -> list[str]:
    """A command prefix that runs a command in the machine's network namespace when this
    process is in another one (a test's): the package downloads need the mirror."""
    target = os.environ.get("FAULTS_ROOT_NETNS") or "/proc/1/ns/net"
    try:
        same = os.readlink("/proc/self/ns/net") == os.readlink(target)
    except OSError:
        same = True
    return [] if same else ["nsenter", f"--net={target}", "--"]


class FreshRoot:
    """One unpacked copy of the cached root; a context manager that removes it."""

    def __init__(self, name: str = "castd-fresh-root", state: Path = STATE):
        self.state = state
        self.dir = Path(tempfile.mkdtemp(prefix=f"{name}-", dir="/var/tmp"))

    def __enter__(self) -> "FreshRoot":
        tar = tarball(self.state)
        subprocess.run(["tar", "-xf", str(tar), "-C", str(self.dir), "--numeric-owner"], check=True)
        shutil.copy("/etc/resolv.conf", self.dir / "etc" / "resolv.conf")      # apt resolves the mirror
        # What Debian's installer writes and mmdebstrap does not: localhost resolves (the stack's
        # Supabase URL names it).
        hosts = self.dir / "etc" / "hosts"
        if "localhost" not in (hosts.read_text() if hosts.exists() else ""):
            hosts.write_text("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def path(self, inside: str) -> Path:
        """The host's path of a path inside the root."""
        return self.dir / inside.lstrip("/")

    def _argv(self, mode: str, args: list[str]) -> list[str]:
        return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", _ENTER, "enter",
                str(self.dir), mode, *args]

    def _env(self, env: dict | None, mode: str) -> dict:
        e = dict(BASE_ENV, **(env or {}))
        if mode == "apt":
            APT_CACHE.joinpath("partial").mkdir(parents=True, exist_ok=True)
            e["APT_ARCHIVES"] = str(APT_CACHE)
        return e

    def run(self, *args: str, env: dict | None = None, apt: bool = False, timeout: float = 600,
            input: str | None = None) -> subprocess.CompletedProcess:
        """Runs a command inside; apt=True: with the host's package cache and the machine's network."""
        mode = "apt" if apt else "run"
        return subprocess.run([*(machine_net() if apt else []), *self._argv(mode, list(args))], env=self._env(env, mode),
                              capture_output=True, text=True, timeout=timeout, input=input)

    async def spawn(self, *args: str, env: dict | None = None, **kw) -> asyncio.subprocess.Process:
        """Starts a command inside (asyncio), e.g. castd --session."""
        return await asyncio.create_subprocess_exec(*self._argv("run", list(args)), env=self._env(env, "run"), **kw)

    def mounts(self) -> list[str]:
        """Mount points under the root that this process's mount namespace sees (none, if the
        namespaces did their job)."""
        root = str(self.dir)
        out = []
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            mp = line.split()[4].encode().decode("unicode_escape")
            if mp == root or mp.startswith(root + "/"):
                out.append(mp)
        return out

    def remove(self) -> None:
        if not self.dir.exists():
            return
        left = self.mounts()
        if left:        # never delete through a mount (a bound /dev would lose the machine's nodes)
            raise RuntimeError(f"mounts left under {self.dir}: {left}; not removing it")
        subprocess.run(["rm", "-rf", "--one-file-system", str(self.dir)], check=True)
