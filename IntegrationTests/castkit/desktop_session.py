"""A desktop for castd's issue-30 tests without the machine's own: a private runtime directory
(castd's registry lives there), a private session bus and, when asked, a notification service
that records every Notify and plays "Stop casting" on request (notification_standin.py).
`Notifications` adds that service to any castkit.pw_session.PrivateSession (the audio rig too)."""
from __future__ import annotations

import json
import pathlib
import signal
import subprocess

from castkit.pw_session import HERE, PrivateSession


class Notifications:
    """A notification service on the session's bus; mixed into a PrivateSession."""
    notifications: subprocess.Popen | None = None

    @property
    def log(self) -> pathlib.Path:
        return self.dir / "notifications.jsonl"

    async def start_notifications(self, actions: bool = True) -> None:
        self.notifications = self._spawn(["/usr/bin/python3", str(HERE / "notification_standin.py"),
                                          "--bus", self.bus, "--log", str(self.log)] + ([] if actions else ["--no-actions"]),
                                         "notification_standin", stdout=subprocess.PIPE)
        ready = await self._line(self.notifications)
        assert ready == "ready", (self.dir / "notification_standin.log").read_text()

    def calls(self, call: str | None = None) -> list[dict]:
        """The recorded calls (their options), of `call` when given."""
        if not self.log.exists():
            return []
        rows = [json.loads(l) for l in self.log.read_text().splitlines() if l.strip()]
        return [r["options"] for r in rows if call is None or r["call"] == call]

    def choose_stop(self) -> None:
        """The person chooses the newest notification's action ("Stop casting")."""
        self.notifications.send_signal(signal.SIGUSR1)


class DesktopSession(Notifications, PrivateSession):
    """A bus and a runtime directory (no PipeWire), with the notification service unless told not."""

    def __init__(self):
        super().__init__("castd-h-desk-")

    async def start(self, notifications: bool = True, actions: bool = True) -> "DesktopSession":
        await self.start_bus()
        if notifications:
            await self.start_notifications(actions)
        return self

    def env(self) -> dict:
        """What castd needs to find this desktop: its runtime directory and its bus."""
        return {"XDG_RUNTIME_DIR": str(self.dir), "DBUS_SESSION_BUS_ADDRESS": self.bus}
