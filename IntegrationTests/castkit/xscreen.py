"""An Xvfb screen with castd's test picture on it, for casts the tests can check."""
from __future__ import annotations

import asyncio
import os
import subprocess

from castkit.castd_build import binary

BARS = [(0xBF, 0xBF, 0xBF), (0xBF, 0xBF, 0), (0, 0xBF, 0xBF), (0, 0xBF, 0), (0xBF, 0, 0xBF), (0xBF, 0, 0), (0, 0, 0xBF)]


def free_display() -> int:
    for n in range(50, 99):
        if not os.path.exists(f"/tmp/.X11-unix/X{n}") and not os.path.exists(f"/tmp/.X{n}-lock"):
            return n
    raise RuntimeError("no free X display number in 50–98")


class XScreen:
    def __init__(self, width=1280, height=720):
        self.width, self.height = width, height
        self.number = free_display()
        self.display = f":{self.number}"
        self.xvfb: subprocess.Popen | None = None
        self.painter: subprocess.Popen | None = None

    async def start(self, animate=True):
        self.xvfb = subprocess.Popen(["Xvfb", self.display, "-screen", "0", f"{self.width}x{self.height}x24",
                                      "-nolisten", "tcp", "-noreset"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:   # a screen that cannot start leaves no Xvfb behind (castd-pattern not built, say)
            for _ in range(100):
                if os.path.exists(f"/tmp/.X11-unix/X{self.number}"):
                    break
                await asyncio.sleep(0.05)
            else:
                raise RuntimeError("Xvfb did not start")
            pattern = binary("castd-pattern")
            args = [pattern, "--display", self.display, "--fps", "30"] + ([] if animate else ["--static"])
            self.painter = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            line = await asyncio.get_running_loop().run_in_executor(None, self.painter.stdout.readline)
            assert b"drawing on" in line, line
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self):
        for p in (self.painter, self.xvfb):
            if p and p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()


def bar_colours(frame) -> list[tuple[int, int, int]]:
    """Mean RGB of the middle of each bar in a decoded frame (numpy h×w×3)."""
    h, w, _ = frame.shape
    out = []
    for i in range(7):
        x0, x1 = int((i + 0.3) * w / 7), int((i + 0.7) * w / 7)
        patch = frame[int(h * 0.15):int(h * 0.5), x0:x1]
        out.append(tuple(int(v) for v in patch.reshape(-1, 3).mean(axis=0)))
    return out


def bars_match(frame, tolerance=10) -> bool:
    return all(max(abs(g - w) for g, w in zip(got, want)) <= tolerance for got, want in zip(bar_colours(frame), BARS))
