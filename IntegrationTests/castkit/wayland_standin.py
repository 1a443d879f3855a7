"""A screen-cast session without a compositor, for castd's portal path: a
private session dbus-daemon (no activatable services), pipewire and
wireplumber in a fresh XDG_RUNTIME_DIR, castd-pattern offering its PipeWire
test picture as a Video/Source node, and the stand-in ScreenCast portal
(portal_standin.py) handing that real node out. Stopped with SIGKILL."""
from __future__ import annotations

import json
import pathlib
import shutil
import subprocess

import numpy as np

from castkit.pw_session import PrivateSession
from castkit.castd_build import binary

HERE = pathlib.Path(__file__).resolve().parent


def installed() -> bool:
    return all(shutil.which(b) for b in ("pipewire", "wireplumber", "dbus-daemon"))


def expected_picture(width: int, height: int) -> np.ndarray:
    """PipeWirePatternProducer.colour for every pixel, as an RGB array (h, w, 3)."""
    x = np.arange(width)[None, :].repeat(height, 0)
    y = np.arange(height)[:, None].repeat(width, 1)
    return np.stack([x & 0xFF, y & 0xFF, ((x >> 8) * 16 + (y >> 8)) & 0xFF], axis=-1).astype(np.uint8)


class StandInScreenCast(PrivateSession):
    def __init__(self, width: int, height: int, fps: int = 30, static: bool = False, portal_args: tuple = (),
                 pattern_args: tuple = ()):
        super().__init__("castd-wl.")
        self.width, self.height, self.fps, self.static = width, height, fps, static
        self.portal_args = list(portal_args)   # extra portal_standin.py flags, e.g. ("--never-answer",)
        self.pattern_args = list(pattern_args)   # extra castd-pattern flags, e.g. ("--dmabuf",)
        self.log = self.dir / "portal.jsonl"
        self.node = 0

    def env(self) -> dict:
        return self.spawn_env()

    async def start(self) -> "StandInScreenCast":
        await self.start_session()
        sock = self.dir / "pipewire-0"
        pattern = self._spawn([binary("castd-pattern"), "--pipewire", f"{self.width}x{self.height}", "--fps", str(self.fps)]
                              + (["--static"] if self.static else []) + self.pattern_args, "pattern", stdout=subprocess.PIPE)
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
