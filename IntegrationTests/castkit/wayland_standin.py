"""A screen-cast session without a compositor, for castd's portal path: a
private session dbus-daemon (no activatable services), pipewire and
wireplumber in a fresh XDG_RUNTIME_DIR, castd-pattern offering its PipeWire
test picture as a Video/Source node, and the stand-in ScreenCast portal
(portal_standin.py) handing that real node out. Stopped with SIGKILL."""
from __future__ import annotations

import asyncio
import json
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile

import numpy as np

from castkit.audio_rig import start_session
from castkit.castd_build import binary

HERE = pathlib.Path(__file__).resolve().parent


def installed() -> bool:
    return all(shutil.which(b) for b in ("pipewire", "wireplumber", "dbus-daemon"))


def expected_picture(width: int, height: int) -> np.ndarray:
    """PipeWirePatternProducer.colour for every pixel, as an RGB array (h, w, 3)."""
    x = np.arange(width)[None, :].repeat(height, 0)
    y = np.arange(height)[:, None].repeat(width, 1)
    return np.stack([x & 0xFF, y & 0xFF, ((x >> 8) * 16 + (y >> 8)) & 0xFF], axis=-1).astype(np.uint8)


class StandInScreenCast:
    def __init__(self, width: int, height: int, fps: int = 30, static: bool = False, portal_args: tuple = ()):
        self.width, self.height, self.fps, self.static = width, height, fps, static
        self.portal_args = list(portal_args)   # extra portal_standin.py flags, e.g. ("--never-answer",)
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="castd-wl."))
        os.chmod(self.dir, 0o700)
        self.log = self.dir / "portal.jsonl"
        self.procs: list[subprocess.Popen] = []
        self.bus = ""
        self.node = 0

    def env(self) -> dict:
        return {"XDG_RUNTIME_DIR": str(self.dir), "DBUS_SESSION_BUS_ADDRESS": self.bus, "PATH": os.environ["PATH"],
                "HOME": str(self.dir)}

    def _spawn(self, args, name, stdout=None) -> subprocess.Popen:
        log = open(self.dir / f"{name}.log", "w")
        p = subprocess.Popen(args, env=self.env(), stdout=stdout or log, stderr=log)
        self.procs.append(p)
        return p

    async def _line(self, p: subprocess.Popen) -> str:
        return (await asyncio.get_running_loop().run_in_executor(None, p.stdout.readline)).decode().strip()

    async def start(self) -> "StandInScreenCast":
        self.bus = await start_session(self.dir, self._spawn)
        sock = self.dir / "pipewire-0"
        self._spawn(["wireplumber"], "wireplumber")
        pattern = self._spawn([binary("castd-pattern"), "--pipewire", f"{self.width}x{self.height}", "--fps", str(self.fps)]
                              + (["--static"] if self.static else []), "pattern", stdout=subprocess.PIPE)
        line = await self._line(pattern)
        assert line.startswith("castd-pattern: pipewire node "), line
        self.node = int(line.split()[3])
        portal = self._spawn(["/usr/bin/python3", str(HERE / "portal_standin.py"), "--bus", self.bus, "--node", str(self.node),
                              "--pipewire-socket", str(sock), "--log", str(self.log), "--width", str(self.width),
                              "--height", str(self.height), *self.portal_args], "portal", stdout=subprocess.PIPE)
        assert await self._line(portal) == "ready"
        return self

    def calls(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(l) for l in self.log.read_text().splitlines() if l.strip()]

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()
        self.procs = []
        shutil.rmtree(self.dir, ignore_errors=True)
