"""An Xvfb screen with the bench painter on it (static or busy background, optional timecode;
or a quality content, content.py)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from castkit.xscreen import free_display


class BenchScreen:
    def __init__(self, width: int, height: int, background: str, timecode: bool = False, fps: float = 60,
                 content: str | None = None):
        self.width, self.height, self.content = width, height, content
        self.background, self.timecode, self.fps = background, timecode, fps
        self.number = free_display()
        self.display = f":{self.number}"
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> "BenchScreen":
        self.xvfb = subprocess.Popen(["Xvfb", self.display, "-screen", "0", f"{self.width}x{self.height}x24",
                                      "-nolisten", "tcp", "-noreset"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(self.xvfb)
        for _ in range(200):
            if os.path.exists(f"/tmp/.X11-unix/X{self.number}"):
                break
            time.sleep(0.05)
        else:
            self.stop()
            raise RuntimeError("Xvfb did not start")
        args = [sys.executable, str(Path(__file__).with_name("painter.py")), "--display", self.display,
                "--background", self.background, "--fps", str(self.fps)] + (["--timecode"] if self.timecode else []) \
            + (["--content", self.content] if self.content else [])
        self.painter = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.procs.append(self.painter)
        line = self.painter.stdout.readline()
        if b"drawing on" not in line:
            err = self.painter.stderr.read().decode(errors="replace")
            self.stop()
            raise RuntimeError(f"painter failed: {line!r} {err[-2000:]}")
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs = []
