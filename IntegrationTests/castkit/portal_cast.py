"""One paired receiver and one `castd --capture portal` run inside a desktop rig as the rig's user
(castkit/mutter_rig.py, castkit/kwin_rig.py): the real-portal tests of IntegrationTests/wayland."""
from __future__ import annotations

import asyncio
import pathlib

from castkit.castd_proc import Daemon, castd_binary, castd_env, pair
from castkit.receiver_answerer import ReceiverAnswerer


class PortalCastOnRig:
    """One paired receiver and one `castd --capture portal` inside the rig, as its user."""

    def __init__(self, stack, rig, state: pathlib.Path):
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
