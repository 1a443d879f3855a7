"""Scripts/install lays out a working per-user installation with private settings."""
import os
import pathlib
import stat
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_install_into_a_fresh_home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ, HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
               CASTD_API_URL="http://127.0.0.1:1", CASTD_SUPABASE_URL="http://localhost:1", CASTD_SUPABASE_KEY="pk")
    env.pop("DBUS_SESSION_BUS_ADDRESS", None)
    r = subprocess.run([str(ROOT / "Scripts" / "install"), "--debug"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr

    castd = home / ".local" / "bin" / "castd"
    out = subprocess.run([str(castd), "--version"], capture_output=True, text=True, check=True).stdout
    assert out.startswith("castd ")

    unit = home / ".config" / "systemd" / "user" / "castd@.service"
    assert f"ExecStart={castd} --session %i" in unit.read_text()
    v = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)], env=env, capture_output=True, text=True)
    assert v.returncode == 0, v.stderr

    desktop = home / ".local" / "share" / "applications" / "castd.desktop"
    assert f"Exec={home}/.local/bin/castd-launcher" in desktop.read_text()
    d = subprocess.run(["desktop-file-validate", str(desktop)], capture_output=True, text=True)
    assert d.returncode == 0, d.stdout + d.stderr

    settings = home / ".config" / "castd" / "environment"
    assert stat.S_IMODE(settings.stat().st_mode) == 0o600
    assert stat.S_IMODE(settings.parent.stat().st_mode) == 0o700
    assert "CASTD_API_URL=http://127.0.0.1:1" in settings.read_text()

    # A second install keeps the user's edited settings.
    settings.write_text("CASTD_API_URL=http://edited\n")
    r = subprocess.run([str(ROOT / "Scripts" / "install"), "--debug", "--no-build"], cwd=ROOT, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert settings.read_text() == "CASTD_API_URL=http://edited\n"
