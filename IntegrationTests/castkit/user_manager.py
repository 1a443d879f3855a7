"""A real systemd user manager (`/lib/systemd/systemd --user`) for a test user, on a machine
that was not booted with systemd.

Started plainly, it refuses: "Trying to run as user instance, but the system has not been
booted with systemd." (its check is sd_booted(): /run/systemd/system/ exists only when systemd
is PID 1). Given that directory it gets one step further and exits 1 without a word: it
cannot create `init.scope` in its cgroup (mkdir /sys/fs/cgroup/unified/init.scope: EACCES),
because on a real system the system manager delegates a cgroup subtree to user@UID.service,
and here nobody did. So this module plays exactly those two parts of the system manager, and
nothing else:

- /run/systemd/system/ exists for the user manager only: a tmpfs on /run/systemd in a mount
  namespace of its own (`unshare --mount --propagation private`), gone when it exits;
- a delegated cgroup: `castd-user-<tag>` in each cgroup hierarchy the machine has (the unified
  one, and the named `systemd` v1 one of a hybrid layout), owned by the test user, the manager
  started inside it; removed at the end.

Everything above it is systemd's own: unit loading, Type=notify and READY=1, the watchdog,
Restart=, stop. The test user is a system user made for the run (useradd --system) and removed
with its files at the end. `systemctl --user` runs as that user in the manager's mount
namespace (nsenter), against the manager's private socket in $XDG_RUNTIME_DIR/systemd/.
Needs root."""
from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import subprocess
import time
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")
MANAGER = "/lib/systemd/systemd"

_START = r'''set -eu
mount -t tmpfs -o mode=0755 tmpfs /run/systemd
mkdir /run/systemd/system
for d in "$@"; do echo $$ > "$d/cgroup.procs"; done
exec runuser -u "$CASTD_TEST_USER" -- env -i HOME="$HOME" USER="$CASTD_TEST_USER" LOGNAME="$CASTD_TEST_USER" \
  PATH=/usr/local/bin:/usr/bin:/bin XDG_RUNTIME_DIR="$XDG_RUNTIME_DIR" LANG=C.UTF-8 \
  "$MANAGER" --user --log-target=console --log-level=info
'''


def cgroup_hierarchies() -> list[Path]:
    """Where a delegated cgroup goes: the unified hierarchy (at /sys/fs/cgroup itself on a pure
    cgroup v2 machine, at unified/ on a hybrid one) and the named systemd v1 hierarchy if any."""
    if (CGROUP / "cgroup.procs").exists():
        return [CGROUP]
    return [p for p in (CGROUP / "unified", CGROUP / "systemd") if (p / "cgroup.procs").exists()]


def refusal_without_help(timeout: float = 20) -> tuple[int, str]:
    """What `systemd --user` says when started as it is, for the test user of no manager: exit
    status and output (the machine's answer, recorded in docs/packaging.md)."""
    with ThrowawayUser() as u:
        r = subprocess.run(["runuser", "-u", u.name, "--", "env", "-i", f"HOME={u.home}",
                            f"XDG_RUNTIME_DIR={u.runtime}", MANAGER, "--user"],
                           capture_output=True, text=True, timeout=timeout)
        return r.returncode, (r.stdout + r.stderr).strip()


class ThrowawayUser:
    """A system user for one test, with a home and a 0700 runtime directory; removed after."""

    def __init__(self):
        self.name = f"castd-t{secrets.token_hex(3)}"
        self.home = Path(f"/var/tmp/{self.name}")
        self.runtime = Path(f"/tmp/{self.name}-run")

    def __enter__(self) -> "ThrowawayUser":
        subprocess.run(["useradd", "--system", "--home-dir", str(self.home), "--create-home",
                        "--shell", "/usr/sbin/nologin", self.name], check=True, capture_output=True)
        pw = pwd.getpwnam(self.name)
        self.uid, self.gid = pw.pw_uid, pw.pw_gid
        self.runtime.mkdir(mode=0o700)
        os.chown(self.runtime, self.uid, self.gid)
        return self

    def __exit__(self, *exc) -> None:
        subprocess.run(["pkill", "-KILL", "-u", self.name], capture_output=True)
        subprocess.run(["userdel", "--remove", self.name], capture_output=True)
        shutil.rmtree(self.home, ignore_errors=True)
        shutil.rmtree(self.runtime, ignore_errors=True)

    def chown_tree(self, path: Path) -> None:
        subprocess.run(["chown", "-R", f"{self.uid}:{self.gid}", str(path)], check=True)


class UserManager:
    """`systemd --user` for `user`, started in its delegated cgroup; a context manager."""

    def __init__(self, user: ThrowawayUser):
        self.user = user
        self.tag = user.name
        self.cgroups = [h / f"castd-user-{self.tag}" for h in cgroup_hierarchies()]
        self.proc: subprocess.Popen | None = None
        self.log = user.home / "systemd-manager.log"        # removed with the home

    def __enter__(self) -> "UserManager":
        if not self.cgroups:
            raise RuntimeError("no cgroup hierarchy to delegate under /sys/fs/cgroup")
        for d in self.cgroups:
            d.mkdir()
            subprocess.run(["chown", "-R", f"{self.user.uid}:{self.user.gid}", str(d)], check=True)
        env = dict(os.environ, CASTD_TEST_USER=self.user.name, HOME=str(self.user.home),
                   XDG_RUNTIME_DIR=str(self.user.runtime), MANAGER=MANAGER)
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", _START,
                                          "start", *map(str, self.cgroups)], env=env, stdout=out, stderr=out)
        deadline = time.monotonic() + 30
        while True:
            state = self.systemctl("is-system-running").stdout.strip()
            if state in ("running", "degraded"):
                self.state = state
                return self
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"systemd --user did not come up (state '{state}', exit {self.proc.poll()}): "
                                   f"{self.log.read_text()[-1500:]}")
            time.sleep(0.2)

    def __exit__(self, *exc) -> None:
        self.stop()

    def systemctl(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        prefix = ["nsenter", "--mount", f"--target={self.proc.pid}"] if self.proc and self.proc.poll() is None else []
        return subprocess.run([*prefix, "runuser", "-u", self.user.name, "--", "env", f"XDG_RUNTIME_DIR={self.user.runtime}",
                               "systemctl", "--user", "--no-pager", *args], capture_output=True, text=True, timeout=timeout)

    def show(self, unit: str, *props: str) -> dict[str, str]:
        out = self.systemctl("show", unit, "-p", ",".join(props)).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)       # the manager stops its units, then exits
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for d in self.cgroups:
            if not d.exists():
                continue
            for sub in sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [d]:
                procs = (sub / "cgroup.procs").read_text().split() if (sub / "cgroup.procs").exists() else []
                for pid in procs:
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                for _ in range(50):
                    try:
                        sub.rmdir()
                        break
                    except OSError:
                        time.sleep(0.1)
