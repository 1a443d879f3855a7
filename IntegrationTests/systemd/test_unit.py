"""The systemd user unit passes `systemd-analyze verify` and says what the daemon relies on."""
import configparser
import pathlib
import os
import shutil
import subprocess

import pytest

from castkit.castd_build import binary

ROOT = pathlib.Path(__file__).resolve().parents[2]
UNIT = ROOT / "systemd" / "castd@.service"


def _castd_binary() -> pathlib.Path:
    return pathlib.Path(binary("castd"))


def _unit_for(tmp_path: pathlib.Path, castd: pathlib.Path) -> pathlib.Path:
    """The unit as Scripts/install writes it for a prefix: the package's /usr/bin/castd replaced."""
    text = UNIT.read_text()
    assert "ExecStart=/usr/bin/castd --session %i" in text.splitlines()
    unit = tmp_path / "castd@.service"
    unit.write_text(text.replace("ExecStart=/usr/bin/castd ", f"ExecStart={castd} "))
    return unit


def test_unit_verifies_with_the_binary_installed(tmp_path):
    if shutil.which("systemd-analyze") is None:
        pytest.fail("systemd-analyze is missing: Scripts/bootstrap installs the systemd package")
    binary = _castd_binary()
    assert binary.exists(), "build castd first (Scripts/test does)"
    home = tmp_path / "home"
    (home / ".local" / "bin").mkdir(parents=True)
    shutil.copy(binary, home / ".local" / "bin" / "castd")
    env = dict(os.environ, HOME=str(home))
    unit = _unit_for(tmp_path, home / ".local" / "bin" / "castd")
    # --man=no: the man page castd(1) that Documentation= names is the package's, not this machine's
    # (IntegrationTests/package checks the installed unit with its man pages).
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stderr.strip() == "", r.stderr


def test_unit_fails_verification_without_the_binary(tmp_path):
    # Proves the check above is a real check: with no castd installed, verify must complain.
    env = dict(os.environ, HOME=str(tmp_path))
    unit = _unit_for(tmp_path, tmp_path / ".local" / "bin" / "castd")
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)], env=env, capture_output=True, text=True)
    assert r.returncode != 0
    assert "castd" in r.stderr


def test_unit_is_notify_with_watchdog_and_restarts_only_on_failure():
    cp = configparser.ConfigParser(strict=False, interpolation=None)
    cp.optionxform = str
    cp.read(UNIT)
    svc = cp["Service"]
    assert svc["Type"] == "notify"
    assert svc["ExecStart"].endswith("castd --session %i")
    assert svc["KillSignal"] == "SIGTERM"
    assert svc["Restart"] == "on-failure"
    assert int(svc["WatchdogSec"].rstrip("s")) > 0
    # READY comes once signed in and subscribed (seconds), not after a viewer shows up.
    assert svc["TimeoutStartSec"] == "90s"
    assert "2" in svc["RestartPreventExitStatus"].split()


def test_exit_codes_the_help_calls_final_are_kept_out_of_restart():
    """Issue 17: a permanent end (session over, denied, authorization expired) has its own exit
    status, and the unit does not restart on it; every code in --help is accounted for."""
    r = subprocess.run([str(_castd_binary()), "--help"], capture_output=True, text=True)
    assert r.returncode == 0
    text = r.stdout.split("Exit codes:")[1].split("\n\n")[0]
    codes: dict[int, str] = {}
    last = None
    for line in text.splitlines():
        parts = line.split(None, 1)
        if parts and parts[0].isdigit():
            last = int(parts[0])
            codes[last] = parts[1]
        elif last is not None and line.strip():
            codes[last] += " " + line.strip()   # a continuation line
    assert set(codes) == {0, 1, 2, 3, 69}, codes
    assert "pair again" in codes[3] and "does not restart" in codes[3]
    cp = configparser.ConfigParser(strict=False, interpolation=None)
    cp.optionxform = str
    cp.read(UNIT)
    prevent = {int(c) for c in cp["Service"]["RestartPreventExitStatus"].split()}
    assert prevent == {2, 3, 69}
    assert 1 not in prevent   # transient failures still restart
