"""The integration tests marked `long` (IntegrationTests/pytest.ini), as one row of the full
fault set.

CI runs the quick row of each capability; a capability's long pytest rows (a real systemd user
manager, §11's give-up after three re-offers on a cut path, a static Mutter screen watched for
a minute, Chromium forced to VP8) are skipped there and run here instead, in a child pytest on
the host (each brings its own stack, screens and namespaces, all on loopback) with
CASTD_LONG=1, entered into the machine's own network and mount namespaces. The row passes when pytest passes and ran at least one test; the per-test results
are in its log.
"""
from __future__ import annotations

import asyncio
import os
import re
import sys
import time

from castkit.paths import IT, REPO
from castkit.faults.world import Result, World, check
from castkit.mutter_rig import missing_shell

NAME = "long integration rows (pytest -m long)"

async def long_rows(w: World) -> Result:
    r = Result(NAME, "every test marked long passes (at least one ran)", "")
    out = w.out / "long-rows"
    out.mkdir(parents=True, exist_ok=True)
    t = time.monotonic()
    # In the machine's network and mount namespaces, as CI runs them: the inner fault run's own
    # sysfs (`ip netns exec`) has no cgroup2 mount, which the rows' off-machine guard needs, and
    # its network namespace no route to the package mirror.
    root = os.environ.get("FAULTS_ROOT_PID")
    enter = ["nsenter", f"--net=/proc/{root}/ns/net", f"--mount=/proc/{root}/ns/mnt", "--"] if root else []
    # What only the long rows need is installed here rather than by Scripts/bootstrap (CI, which
    # runs none of them, would pay for it on every fresh machine): gnome-shell for a window shared
    # through the real GNOME portal; the rig's own check says whether it is there (the command
    # and its Debian package have the same name).
    if missing := missing_shell():
        inst = await asyncio.create_subprocess_exec(*enter, str(REPO / "Scripts" / "apt-install"), *missing,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        text, _ = await inst.communicate()
        (out / "apt-install.log").write_bytes(text)
        if inst.returncode != 0:
            return check(r, False, f"Scripts/apt-install {' '.join(missing)} failed (exit {inst.returncode}); see apt-install.log")
    p = await asyncio.create_subprocess_exec(
        *enter, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(IT / "pytest.ini"),
        "-m", "long", str(IT), cwd=str(REPO), env=dict(os.environ, CASTD_LONG="1"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    text, _ = await asyncio.wait_for(p.communicate(), 1800)
    log = text.decode(errors="replace")
    (out / "pytest.log").write_text(log)
    m = re.search(r"(\d+) passed", log)
    passed = int(m[1]) if m else 0
    tail = next((l for l in reversed(log.splitlines()) if " passed" in l or " failed" in l or "error" in l), "")
    return check(r, p.returncode == 0 and passed > 0, tail.strip("= ") or f"pytest exited {p.returncode}",
                 seconds=round(time.monotonic() - t, 1), tests_passed=passed)


def rows() -> list[tuple]:
    """The row in Scripts/faults' SCENARIOS shape (full set only)."""
    return [(NAME, False, long_rows, (), {})]
