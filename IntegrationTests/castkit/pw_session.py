"""A private desktop session for tests that need D-Bus and PipeWire without touching the
machine's own: a fresh 0700 XDG_RUNTIME_DIR, a session dbus-daemon with no activatable
services (private-session-bus.conf), pipewire and, when the user wants it, wireplumber.
Each process logs to <dir>/<name>.log; `stop()` kills them (SIGKILL, newest first) and
removes the directory. castkit/audio_rig.py (a sink and a player) and
castkit/wayland_standin.py (castd-pattern and the stand-in portal) build on it."""
from __future__ import annotations

import asyncio
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
BUS_CONF = HERE / "private-session-bus.conf"


class PrivateSession:
    def __init__(self, prefix: str):
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix=prefix))
        os.chmod(self.dir, 0o700)
        self.procs: list[subprocess.Popen] = []
        self.bus = ""

    def spawn_env(self) -> dict:
        """The environment of the session's processes."""
        return {"XDG_RUNTIME_DIR": str(self.dir), "DBUS_SESSION_BUS_ADDRESS": self.bus,
                "PATH": os.environ["PATH"], "HOME": str(self.dir)}

    def _spawn(self, args, name, stdout=None) -> subprocess.Popen:
        log = open(self.dir / f"{name}.log", "w")
        p = subprocess.Popen(args, env=self.spawn_env(), stdout=stdout or log, stderr=log)
        log.close()
        self.procs.append(p)
        return p

    async def _line(self, p: subprocess.Popen) -> str:
        """The next line a process started with stdout=PIPE prints, stripped."""
        return (await asyncio.get_running_loop().run_in_executor(None, p.stdout.readline)).decode().strip()

    async def start_bus(self) -> None:
        """The session dbus-daemon alone; returns once it listens (its address in `bus`)."""
        (self.dir / "bus.conf").write_text(BUS_CONF.read_text().replace("@DIR@", str(self.dir)))
        bus = self._spawn(["dbus-daemon", f"--config-file={self.dir}/bus.conf", "--nofork", "--nopidfile",
                           "--print-address=1"], "dbus", stdout=subprocess.PIPE)
        self.bus = await self._line(bus)

    async def start_session(self, wireplumber: bool = True) -> None:
        """The bus, then pipewire; returns once pipewire listens (then wireplumber, if asked)."""
        await self.start_bus()
        self._spawn(["pipewire"], "pipewire")
        sock = self.dir / "pipewire-0"
        for _ in range(250):   # pipewire has no readiness pipe: its socket appears when it listens
            if sock.exists():
                break
            await asyncio.sleep(0.02)
        if wireplumber:
            self._spawn(["wireplumber"], "wireplumber")

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()
        self.procs = []
        shutil.rmtree(self.dir, ignore_errors=True)
