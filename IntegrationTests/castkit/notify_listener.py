"""Plays systemd's part of the sd_notify protocol (sd_notify(3)) for a process we start, since
no user manager runs on these machines (`systemd --user` refuses to start without a booted
systemd): an AF_UNIX datagram socket whose path goes in NOTIFY_SOCKET, every message recorded
with its arrival time, and systemd's watchdog rule (systemd.service(5), WatchdogSec=): once the
watchdog is armed, a WATCHDOG=1 must arrive within the interval, else the service gets
SIGABRT (WatchdogSignal=) and counts as failed."""
from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Message:
    at: float               # time.monotonic()
    fields: dict[str, str]


@dataclass
class NotifyListener:
    path: Path
    watchdog_sec: float
    messages: list[Message] = field(default_factory=list)
    killed_at: float | None = None     # when the watchdog fired, if it did
    _sock: socket.socket | None = None
    _task: asyncio.Task | None = None

    @classmethod
    async def start(cls, path: Path, watchdog_sec: float) -> "NotifyListener":
        self = cls(path, watchdog_sec)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.bind(str(path))
        s.setblocking(False)
        self._sock = s
        return self

    def env(self) -> dict[str, str]:
        return {"NOTIFY_SOCKET": str(self.path), "WATCHDOG_USEC": str(int(self.watchdog_sec * 1e6))}

    def supervise(self, pid: int) -> None:
        """Reads messages and enforces the watchdog on `pid` (armed from now, as systemd arms it
        when the service's main process starts)."""
        self._task = asyncio.get_running_loop().create_task(self._run(pid))

    async def _run(self, pid: int) -> None:
        loop = asyncio.get_running_loop()
        last_ping = time.monotonic()
        while True:
            try:
                data = await asyncio.wait_for(loop.sock_recv(self._sock, 4096), 0.1)
                now = time.monotonic()
                fields = dict(l.split("=", 1) for l in data.decode().splitlines() if "=" in l)
                self.messages.append(Message(now, fields))
                if fields.get("WATCHDOG") == "1":
                    last_ping = now
            except asyncio.TimeoutError:
                pass
            if time.monotonic() - last_ping > self.watchdog_sec:
                self.killed_at = time.monotonic()
                try:
                    os.kill(pid, signal.SIGABRT)
                except ProcessLookupError:
                    pass
                return

    def values(self, key: str) -> list[tuple[float, str]]:
        return [(m.at, m.fields[key]) for m in self.messages if key in m.fields]

    def pings(self) -> list[float]:
        return [t for t, v in self.values("WATCHDOG") if v == "1"]

    async def close(self) -> None:
        if self._task:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        if self._sock:
            self._sock.close()
        self.path.unlink(missing_ok=True)
