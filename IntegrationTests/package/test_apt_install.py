"""Scripts/apt-install (Scripts/bootstrap's package step) leaves the machine as it found it: the
policy-rc.d that holds service starts off exists during apt-get only, is removed after a
success, a failure and an interrupt, and one that was already there is left alone.

apt-get is replaced by a script that records what it saw (APT_INSTALL_APT_GET) and the
policy-rc.d path points into the test's directory (APT_INSTALL_POLICY_RC_D): the real
machine's /usr/sbin/policy-rc.d is never touched."""
from __future__ import annotations

import os
import signal
import stat
import subprocess
import time
from pathlib import Path

from castkit.paths import SCRIPTS

APT_INSTALL = SCRIPTS / "apt-install"


def fake_apt_get(tmp: Path, policy: Path, *, fail: bool = False, hang: bool = False) -> Path:
    """An apt-get that appends, per call, its arguments and what the policy file said then."""
    log = tmp / "apt.log"
    script = tmp / "apt-get"
    script.write_text(f"""#!/bin/sh
{{ printf '%s|' "$*"; if [ -x '{policy}' ]; then '{policy}' postgresql start; echo "policy=$?"; else echo policy=absent; fi; }} >> '{log}'
case "$1" in install) {"touch '" + str(tmp / "hanging") + "'; sleep 30" if hang else ":"}; {"exit 100" if fail else ":"};; esac
exit 0
""")
    script.chmod(0o755)
    return script


def run(tmp: Path, policy: Path, apt_get: Path, *packages: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, APT_INSTALL_POLICY_RC_D=str(policy), APT_INSTALL_APT_GET=str(apt_get))
    return subprocess.run([str(APT_INSTALL), *packages], env=env, capture_output=True, text=True, timeout=30)


def calls(tmp: Path) -> list[str]:
    return (tmp / "apt.log").read_text().splitlines()


def test_a_policy_it_writes_holds_services_during_the_install_and_is_gone_after(tmp_path):
    policy = tmp_path / "policy-rc.d"
    r = run(tmp_path, policy, fake_apt_get(tmp_path, policy), "coturn", "postgresql-15")
    assert r.returncode == 0, r.stderr
    # During both apt-get calls, invoke-rc.d's policy said 101 (action forbidden) ...
    assert calls(tmp_path) == ["update -q|policy=101",
                               "install -y -q --no-install-recommends coturn postgresql-15|policy=101"]
    # ... and afterwards the machine has no policy-rc.d, as before.
    assert not policy.exists()


def test_the_policy_is_removed_when_apt_get_fails(tmp_path):
    policy = tmp_path / "policy-rc.d"
    r = run(tmp_path, policy, fake_apt_get(tmp_path, policy, fail=True), "no-such-package")
    assert r.returncode == 100
    assert calls(tmp_path)[-1].endswith("policy=101")
    assert not policy.exists()


def test_the_policy_is_removed_when_the_install_is_interrupted(tmp_path):
    policy = tmp_path / "policy-rc.d"
    env = dict(os.environ, APT_INSTALL_POLICY_RC_D=str(policy),
               APT_INSTALL_APT_GET=str(fake_apt_get(tmp_path, policy, hang=True)))
    # As from a terminal, SIGINT at its default: a runner started in the background of a
    # non-interactive shell ignores it, and bash cannot trap a signal ignored at its start.
    p = subprocess.Popen([str(APT_INSTALL), "coturn"], env=env, start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 20
        while not (tmp_path / "hanging").exists():       # apt-get install is running
            assert p.poll() is None and time.monotonic() < deadline, "apt-install never reached apt-get install"
            time.sleep(0.05)
        assert policy.exists()
        os.killpg(p.pid, signal.SIGINT)                   # Ctrl-C in a terminal: the whole group
        assert p.wait(timeout=10) != 0
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert not policy.exists()


def test_a_policy_that_was_there_is_left_untouched(tmp_path):
    policy = tmp_path / "policy-rc.d"
    policy.write_text("#!/bin/sh\n# the machine's own\nexit 0\n")
    policy.chmod(0o750)
    before = policy.stat()
    r = run(tmp_path, policy, fake_apt_get(tmp_path, policy), "coturn")
    assert r.returncode == 0, r.stderr
    assert calls(tmp_path)[-1].endswith("policy=0")       # its own answer, not ours
    assert policy.read_text() == "#!/bin/sh\n# the machine's own\nexit 0\n"
    assert stat.S_IMODE(policy.stat().st_mode) == 0o750 and policy.stat().st_mtime_ns == before.st_mtime_ns


def test_bootstrap_installs_through_apt_install_only():
    """Scripts/bootstrap has no policy-rc.d handling of its own left to forget."""
    text = (SCRIPTS / "bootstrap").read_text()
    assert 'Scripts/apt-install "${missing[@]}"' in text
    assert "apt-get install" not in text and "tee /usr/sbin/policy-rc.d" not in text
