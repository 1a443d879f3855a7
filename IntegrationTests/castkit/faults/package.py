"""The package row (issue 30): the .deb that Scripts/package builds, installed into a fresh
Debian 12 root (castkit/fresh_root.py: no Swift, no development package), run from there and
purged.

In the root: the .deb installed with Scripts/apt-install (apt-get install of the file, its
Depends from Debian's mirror; the run checks that no policy-rc.d stays behind), every
Recommends resolvable (apt-get -s), `castd --version`, `castd doctor` on the run's Xvfb screen
(its socket bound into the root), and a whole cast: the installed castd pairs with the run's
stack (the root shares this namespace, so the stack's loopback is its loopback), an aiortc
receiver in the receiver namespace approves, and it decodes the screen's colour bars through
the impaired-path router; castd ends on SIGTERM with 0. Then `apt-get purge castd`: no file of
`dpkg -L castd` (taken before) remains, no directory of the package's own, no dpkg record.
The row takes ~1 minute with the root tarball and packages cached under .state/fresh-root/
(the first run makes the tarball: ~2 minutes more)."""
from __future__ import annotations

import asyncio
import json
import shutil
import signal
import subprocess
import time
from types import SimpleNamespace

from castkit import rxproc
from castkit.castd_proc import Daemon
from castkit.fresh_root import FreshRoot
from castkit.paths import REPO, SCRIPTS
from castkit.xscreen import BARS
from castkit.faults.world import Cast, ReceiverProc, Result, World, check, frame_figures

INSIDE = "/var/tmp/castd-test"           # the run's files inside the root
ROW = "package: install, cast, purge in a fresh Debian 12 root"


def rows() -> list[tuple]:
    """(name, in --quick, scenario, args, keyword args) for Scripts/faults.py: full set only."""
    return [(ROW, False, fresh_root_row, (), {})]


class _RootCast:
    """What castkit.rxproc.wait_frames needs: the receiver's report and the daemon."""

    def __init__(self, rx: ReceiverProc, daemon: Daemon):
        self.rx, self.daemon = rx, daemon

    async def report(self) -> dict:
        return await self.rx.cmd(cmd="report")


def _ok(p: subprocess.CompletedProcess, what: str) -> str:
    if p.returncode != 0:
        raise RuntimeError(f"{what} failed ({p.returncode}): {(p.stdout + p.stderr)[-1500:]}")
    return p.stdout


async def fresh_root_row(w: World) -> Result:
    r = Result(ROW, "Scripts/package's .deb installs into a fresh Debian 12 root (no Swift, no -dev) with its Depends "
                    "from Debian, leaves no policy-rc.d; the installed castd prints its version, doctor finds X11 "
                    "capture and x264, a cast from it is decoded (colour bars) and ends with 0 on SIGTERM; apt-get "
                    "purge leaves no file or directory of the package and no dpkg record (issue 30)")
    d = w.out / "package"
    d.mkdir(parents=True, exist_ok=True)
    log = (d / "package.log").open("w")
    figures: dict = {}

    def note(text: str) -> None:
        log.write(text.rstrip("\n") + "\n")
        log.flush()

    t0 = time.monotonic()
    p = subprocess.run([str(SCRIPTS / "package"), "--no-build", "--out", str(d / "dist")], cwd=REPO,
                       capture_output=True, text=True, timeout=600)
    note(p.stdout + p.stderr)
    _ok(p, "Scripts/package")
    deb = next((d / "dist").glob("castd_*.deb"))
    figures["deb"] = deb.name
    figures["lintian_warnings"] = [l for l in p.stdout.splitlines() if l.startswith("W: ")]
    figures["package_s"] = round(time.monotonic() - t0, 1)

    with FreshRoot("castd-fresh-root-faults") as root:
        t1 = time.monotonic()
        # A root with no Swift and no development package, and no policy-rc.d of its own.
        pkgs = _ok(root.run("dpkg-query", "-W", "-f", "${Package}\n"), "dpkg-query").split()
        figures["root_packages"] = len(pkgs)
        dev = [x for x in pkgs if x.endswith("-dev") or "swift" in x]
        swift = root.run("sh", "-c", "command -v swift swiftc").stdout.strip()
        had_policy = root.path("/usr/sbin/policy-rc.d").exists()
        if dev or swift or had_policy:
            return check(r, False, f"the root is not fresh: -dev/swift packages {dev}, swift at '{swift}', "
                                   f"policy-rc.d present: {had_policy}", **figures)
        root.path(INSIDE).mkdir(parents=True)
        shutil.copy(deb, root.path(f"{INSIDE}/{deb.name}"))
        shutil.copy(SCRIPTS / "apt-install", root.path(f"{INSIDE}/apt-install"))

        # Install as bootstrap installs (Scripts/apt-install), the .deb with its Depends from the mirror.
        p = root.run(f"{INSIDE}/apt-install", f"{INSIDE}/{deb.name}", apt=True)
        note(p.stdout + p.stderr)
        _ok(p, "apt-get install ./castd.deb in the root")
        figures["installed_packages"] = len(_ok(root.run("dpkg-query", "-W", "-f", "${Package}\n"), "dpkg-query").split())
        policy_left = root.path("/usr/sbin/policy-rc.d").exists()
        # With Recommends, as a person's apt-get install would: every one resolvable (simulated).
        p = root.run("apt-get", "install", "-s", f"{INSIDE}/{deb.name}", "xdg-desktop-portal", "pipewire", "wireplumber",
                     "xdg-desktop-portal-gnome", apt=True)
        note(p.stdout[-3000:] + p.stderr)
        recommends_ok = p.returncode == 0
        figures["with_recommends_would_install"] = sum(1 for l in p.stdout.splitlines() if l.startswith("Inst "))
        files = _ok(root.run("dpkg", "-L", "castd"), "dpkg -L castd").splitlines()
        figures["files"] = len(files)
        figures["install_s"] = round(time.monotonic() - t1, 1)

        version = root.run("castd", "--version").stdout.strip()
        want_version = "castd " + deb.name.split("_")[1].rsplit("-", 1)[0]
        env = {"DISPLAY": w.screen.display, "XDG_RUNTIME_DIR": "/run/user/0",
               "XDG_STATE_HOME": f"{INSIDE}/state", "XDG_CONFIG_HOME": f"{INSIDE}/config",
               "CASTD_API_URL": w.stack.api_url, "CASTD_SUPABASE_URL": w.stack.supabase_url,
               "CASTD_SUPABASE_KEY": w.stack.key}
        root.path("/run/user/0").mkdir(mode=0o700, parents=True, exist_ok=True)
        p = root.run("castd", "doctor", "--json", env=env)
        note(p.stdout + p.stderr)
        doctor = json.loads(p.stdout) if p.returncode == 0 else {}
        backends = {b["name"]: b["available"] for b in doctor.get("captureBackends", [])}
        encoders = {b["name"]: b["available"] for b in doctor.get("encoders", [])}
        doctor_ok = backends.get("xshm") is True and encoders.get("x264") is True
        figures["doctor"] = {"rc": p.returncode, "xshm": backends.get("xshm"), "x264": encoders.get("x264"),
                             "libraries": doctor.get("libraries")}

        cast = await _cast_from_root(w, root, env, d, note)
        figures.update(cast)
        # The state castd kept in the root, for the run's check of credential file modes.
        if root.path(env["XDG_STATE_HOME"]).exists():
            shutil.copytree(root.path(env["XDG_STATE_HOME"]), d / "state", dirs_exist_ok=True)

        # Purge: nothing of the package stays.
        p = root.run("apt-get", "purge", "-y", "castd")
        note(p.stdout + p.stderr)
        _ok(p, "apt-get purge castd")
        left = []
        for f in files:
            host = root.path(f)
            if not (host.exists() or host.is_symlink()) or f in ("/.",):
                continue
            # A directory others share (/usr/bin, /usr/share/man/man1) stays: it must belong to an installed package.
            if host.is_dir() and root.run("dpkg-query", "-S", f).returncode == 0:
                continue
            left.append(f)
        record = root.run("dpkg-query", "-W", "-f", "${Status}", "castd")
        gone = record.returncode != 0 or "not-installed" in record.stdout
        figures["left_after_purge"] = left[:20]
        figures["dpkg_record_after_purge"] = record.stdout.strip() or "none"
        mounts = root.mounts()
    figures["mounts_left"] = mounts
    figures["root_s"] = round(time.monotonic() - t1, 1)

    ok = (version == want_version and not policy_left and recommends_ok and doctor_ok and cast["cast_ok"]
          and not left and gone and not mounts)
    return check(r, ok, f"{deb.name} into a root of {figures['root_packages']} packages (no -dev, no swift): "
                        f"{figures['installed_packages']} after install, policy-rc.d left: {policy_left}, "
                        f"Recommends resolvable: {recommends_ok} (+{figures['with_recommends_would_install']}); "
                        f"'{version}'; doctor xshm={backends.get('xshm')} x264={encoders.get('x264')}; cast: "
                        f"{cast['frames']} frames decoded ({cast['fps']} fps, bars {'match' if cast['bars_ok'] else 'differ'}, "
                        f"{cast['size']}), exit {cast['exit']} on SIGTERM; purge: {len(files)} paths listed, "
                        f"{len(left)} left, dpkg record '{figures['dpkg_record_after_purge']}'; mounts left {len(mounts)}",
                 **figures)


async def _cast_from_root(w: World, root: FreshRoot, env: dict, d, note) -> dict:
    """Pairs the installed castd with an aiortc receiver and casts the run's screen to it."""
    out = {"cast_ok": False, "frames": 0, "fps": 0.0, "bars_ok": False, "size": None, "exit": None}
    rx = await ReceiverProc.start(w, d / "receiver.log")
    daemon = None
    try:
        s = await rx.cmd(cmd="create")
        w.secrets.add(s["pin"])
        pair = await root.spawn("castd", "pair", "--pin", s["pin"], "--json", env=env,
                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        ok = await rx.cmd(cmd="approve", prefs={"autoQuality": True, "resolution": "1080p", "frameRate": 30})
        pout, perr = await asyncio.wait_for(pair.communicate(), 60)
        (d / "pair.log").write_text(pout.decode() + perr.decode())
        if pair.returncode != 0 or "error" in ok:
            raise RuntimeError(f"pairing from the root failed ({pair.returncode}): {ok} {perr.decode()[-500:]}")
        # The credentials it stored, for the run's final grep of every log for secrets.
        Cast.collect_secrets(SimpleNamespace(state_home=root.path(env["XDG_STATE_HOME"]), world=w))
        proc = await root.spawn("castd", "--session", s["sessionId"], "--log-level", "debug", env=env,
                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        daemon = Daemon(proc)
        c = _RootCast(rx, daemon)
        first = await rxproc.wait_frames(c, 30, timeout=60)
        await asyncio.sleep(10)
        rep = await c.report()
        f = frame_figures(rep["frames"], first, time.monotonic())
        bars = await rx.cmd(cmd="bars")
        got = bars.get("bars") or []
        out["bars_ok"] = len(got) == len(BARS) and all(
            max(abs(a - b) for a, b in zip(g, want)) <= 24 for g, want in zip(got, BARS))
        out.update(frames=len(rep["frames"]), fps=f["fps"], size=bars.get("size"), bars=got)
        daemon.signal(signal.SIGTERM)
        rc, _ = await daemon.wait(timeout=15)
        out["exit"] = rc
        out["cast_ok"] = f["fps"] >= 20 and out["bars_ok"] and rc == 0
    finally:
        if daemon:
            await daemon.kill()
            (d / "castd.log").write_text("\n".join(daemon.stderr_lines) + "\n")
        await rx.close()
    return out
