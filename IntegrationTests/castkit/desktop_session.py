"""A desktop for castd's issue-30 tests without the machine's own: a private runtime directory
(castd's registry lives there), a private session bus and, when asked, a notification service
that records every Notify and plays "Stop casting" on request (notification_standin.py)."""
from __future__ import annotations

import json
import signal
import subprocess

from castkit.pw_session import HERE, PrivateSession


class DesktopSession(PrivateSession):
    def __init__(self):
        super().__init__("castd-h-desk-")
        self.notifications: subprocess.Popen | None = None
        self.log = self.dir / "notifications.jsonl"

    async def start(self, notifications: bool = True) -> "DesktopSession":
        await self.start_bus()
        if notifications:
            self.notifications = self._spawn(["/usr/bin/python3", str(HERE / "notification_standin.py"),
                                              "--bus", self.bus, "--log", str(self.log)],
                                             "notification_standin", stdout=subprocess.PIPE)
            ready = await self._line(self.notifications)
            assert ready == "ready", (self.dir / "notification_standin.log").read_text()
        return self

    def env(self) -> dict:
        """What castd needs to find this desktop: its runtime directory and its bus."""
        return {"XDG_RUNTIME_DIR": str(self.dir), "DBUS_SESSION_BUS_ADDRESS": self.bus}

    def calls(self, call: str | None = None) -> list[dict]:
        """The recorded calls (their options), of `call` when given."""
        if not self.log.exists():
            return []
        rows = [json.loads(l) for l in self.log.read_text().splitlines() if l.strip()]
        return [r["options"] for r in rows if call is None or r["call"] == call]

    def choose_stop(self) -> None:
        """The person chooses the newest notification's action ("Stop casting")."""
        self.notifications.send_signal(signal.SIGUSR1)
