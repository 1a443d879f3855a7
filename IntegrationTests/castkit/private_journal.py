"""A real systemd-journald of castd's own, for tests of the journal sink (issue 19).

No systemd runs these machines, but journald does run on its own: in a private mount
namespace (`unshare -m`) with tmpfs over /run/systemd, /run/log and /var/log/journal, it
listens on /run/systemd/journal/socket, where sd_journal_sendv writes, and keeps its
journal in memory. castd runs in that namespace with JOURNAL_STREAM set, so it logs
there; the host's journal (if any) and the other processes see nothing of it. The journal
is read from outside through /proc/<journald>/root while it runs, and copied out to
`state/journal` when castd exits. Needs root (CI runs as root).
"""
from __future__ import annotations

import asyncio
import json
import os
import pathlib
import signal
import subprocess

from castkit.castd_proc import Daemon, castd_binary

JOURNALD = "/lib/systemd/systemd-journald"

# $1: the state directory; the rest: the command to run with the journal.
_SCRIPT = r'''
set -e
st=$1; shift
for d in /run/systemd /run/log; do mkdir -p "$d"; mount -t tmpfs tmpfs "$d"; done
if [ -d /var/log/journal ]; then mount -t tmpfs tmpfs /var/log/journal; fi
mkdir -p /run/systemd/journal
JOURNALD & echo $! > "$st/journald.pid"
for i in $(seq 200); do [ -S /run/systemd/journal/socket ] && break; sleep 0.05; done
[ -S /run/systemd/journal/socket ] || { echo "private_journal: journald did not start" >&2; exit 97; }
"$@" & echo $! > "$st/command.pid"
rc=0; wait $! || rc=$?
journalctl --sync 2>/dev/null || true
cp -r /run/log/journal "$st/journal"
kill "$(cat "$st/journald.pid")"
exit $rc
'''.replace("JOURNALD", JOURNALD)


class JournalDaemon(Daemon):
    """`castd --session` logging into a private journald; stderr still carries its sentences."""

    def __init__(self, proc, state: pathlib.Path):
        super().__init__(proc)
        self.state = state

    @classmethod
    async def start_in(cls, state: pathlib.Path, env: dict, session_id: str, *extra: str) -> "JournalDaemon":
        state.mkdir(parents=True, exist_ok=True)
        env = dict(env, JOURNAL_STREAM="8:4242")   # what systemd sets when stderr is the journal
        p = await asyncio.create_subprocess_exec(
            "unshare", "-m", "--propagation", "private", "bash", "-c", _SCRIPT, "private_journal", str(state),
            castd_binary(), "--session", session_id, "--log-level", "debug", *extra,
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        d = cls(p, state)
        await d._pid("command.pid")
        return d

    async def _pid(self, name: str, timeout: float = 10) -> int:
        f = self.state / name
        for _ in range(int(timeout / 0.05)):
            if f.exists() and f.read_text().strip():
                return int(f.read_text())
            if self.proc.returncode is not None:
                break
            await asyncio.sleep(0.05)
        raise AssertionError(f"private journal: no {name}; stderr:\n" + "\n".join(self.stderr_lines[-20:]))

    def signal(self, sig=signal.SIGTERM):
        os.kill(int((self.state / "command.pid").read_text()), sig)

    def _directory(self) -> pathlib.Path:
        copied = self.state / "journal"
        if copied.exists():
            return copied
        return pathlib.Path(f"/proc/{int((self.state / 'journald.pid').read_text())}/root/run/log/journal")

    def entries(self, *matches: str) -> list[dict]:
        """castd's journal entries (journalctl -o json), filtered by journalctl matches such as
        "CASTD_EVENT=connected", in order."""
        r = subprocess.run(["journalctl", "-D", str(self._directory()), "-o", "json", "--no-pager",
                            "SYSLOG_IDENTIFIER=castd", *matches], capture_output=True, text=True, timeout=20)
        return [json.loads(l) for l in r.stdout.splitlines() if l.strip()]

    async def wait_entry(self, *matches: str, timeout: float = 20) -> dict:
        """Waits for the first journal entry of castd's that has every field of `matches`."""
        return (await self.wait_for(lambda: self.entries(*matches), f"a journal entry {matches}", timeout, 0.1))[0]
