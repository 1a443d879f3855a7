"""One castd `--capture portal` cast inside a rig (castkit/mutter_rig.py, castkit/sway_rig.py), as the rig's user,
to a paired aiortc receiver; and the restore token castd saved. Used by the real-portal tests in wayland/."""
from __future__ import annotations

import asyncio
import pathlib
import subprocess

from castkit.castd_proc import Daemon, castd_binary, castd_env, pair
from castkit.mutter_rig import MutterRig
from castkit.receiver_answerer import ReceiverAnswerer


def saved_token(token_file: pathlib.Path) -> str:
    """The token in castd's restore-token file (the `token=` line; an older file is the bare token)."""
    lines = token_file.read_text().splitlines()
    if lines and lines[0] == "castd-restore-token 1":
        return next(l[len("token="):] for l in lines if l.startswith("token="))
    return token_file.read_text().strip()


class PortalCastOnRig:
    """One paired receiver and one `castd --capture portal` inside the rig (a MutterRig or a SwayRig), as its user."""

    def __init__(self, stack, rig: MutterRig, state: pathlib.Path):
        self.stack, self.rig, self.state = stack, rig, state
        self.rx = self.answerer = self.daemon = None

    async def start(self, *castd_args: str, saved_token: str | None = None) -> "PortalCastOnRig":
        self.rx, rc, _, raw = await pair(self.stack, self.state, prefs={"resolution": "720p", "frameRate": 30})
        assert rc == 0, raw
        if saved_token is not None:   # a token as castd would have saved it
            token_file = self.state / "castd" / "screencast-restore-token"
            token_file.write_text(saved_token + "\n")
            token_file.chmod(0o600)
        sid = self.rx.session["sessionId"]
        self.answerer = ReceiverAnswerer(self.rx.client, sid, keep_frames=2)
        await self.answerer.start()
        self.rig.give(self.state)
        env = self.rig.castd_env(castd_env(self.stack, self.state))
        p = await asyncio.create_subprocess_exec(
            *self.rig.as_user([castd_binary(), "--session", sid, "--log-level", "debug", "--capture", "portal",
                              *castd_args]),
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        self.daemon = Daemon(p)
        return self

    @property
    def log(self) -> str:
        return "\n".join(self.daemon.stderr_lines) if self.daemon else ""

    async def wait_log(self, needle: str, timeout: float, while_waiting=None) -> bool:
        """Whether `needle` shows in castd's log within `timeout` s; `while_waiting()` runs between looks."""
        end = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < end:
            if needle in self.log:
                return True
            if self.daemon.proc.returncode is not None:
                return False
            if while_waiting:
                await asyncio.to_thread(while_waiting)
            await asyncio.sleep(0.5)
        return needle in self.log

    def castd(self, *args: str) -> tuple[int, str, str]:
        """Another castd command, as the rig's user with this cast's state and runtime directories."""
        env = self.rig.castd_env(castd_env(self.stack, self.state))
        p = subprocess.run(self.rig.as_user([castd_binary(), *args]), env=env, capture_output=True, timeout=30)
        return p.returncode, p.stdout.decode(), p.stderr.decode()

    async def stop(self) -> int | None:
        rc = None
        if self.daemon:
            if self.daemon.proc.returncode is None:
                self.daemon.signal()
                try:
                    rc, _ = await self.daemon.wait(timeout=10)
                except asyncio.TimeoutError:
                    pass
            else:
                rc = self.daemon.proc.returncode
            await self.daemon.kill()
        if self.answerer:
            await self.answerer.close()
        if self.rx:
            await self.rx.client.close()
        return rc
