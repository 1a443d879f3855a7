"""A headless GNOME Mutter session to capture from, for tests and the demo.

One rig is: a private session `dbus-daemon`, `pipewire` and `wireplumber`, and
`mutter --headless --virtual-monitor WxH --wayland --no-x11`, all in a fresh
XDG_RUNTIME_DIR, plus a Wayland client that draws castd's test picture
fullscreen (castkit/wayland_pattern.py). Mutter renders in software; nothing
here needs a GPU. Started as root (CI), everything runs as a dedicated
unprivileged user, `castd-rig`, created on first use; started as anyone else,
it runs as that user.

`screencast()` asks Mutter for a cast of the monitor over
org.gnome.Mutter.ScreenCast and returns the PipeWire node id;
`grab(node, count)` reads frames of that node back with GStreamer's
`pipewiresrc`, independently of castd.

With `portal=True` the rig also runs the real `xdg-desktop-portal` with
`xdg-desktop-portal-gnome` (XDG_CURRENT_DESKTOP=GNOME) on its bus, with
their own XDG data/config homes in the runtime directory (so the permission
store that keeps restore tokens starts empty). The GNOME portal's ScreenCast
dialog is a GTK window on the rig's screen; `click(points)` clicks it through
org.gnome.Mutter.RemoteDesktop (castkit/mutter_click.py), and
`portal_dialog_accept(w, h)` gives the points that pick the monitor and press Share.

With `shell=True` the compositor is GNOME Shell (`gnome-shell --headless --virtual-monitor WxH --wayland
--no-x11`, the same libmutter) instead of plain `mutter`: xdg-desktop-portal-gnome 43 lists windows to share from
gnome-shell's org.gnome.Shell.Introspect.GetWindows, which only GNOME Shell serves (and only to the portal
backends' bus names, its own allowlist; the rig leaves that as it is, no unsafe mode). GNOME Shell 43 exits at
start without a system bus (its login manager opens one when /run/systemd/seats exists: "JS ERROR:
Gio.IOErrorEnum: Could not connect"), so the rig gives it a private one with nothing on it (logind, GDM, polkit,
accountsservice absent: it logs that and goes on). The shell starts in the overview; the rig leaves it with
Escape (through RemoteDesktop, as a person would) once the pattern is up.
`pattern_window=(w, h)` draws the pattern in an undecorated w×h window instead of fullscreen.

From a shell: `python3 -m tools.mutter_rig [--size WxH] [--static] [--portal] [--shell]` (run in
IntegrationTests/) starts a rig, prints the environment to reach it, and
stops it on Ctrl-C.
"""
from __future__ import annotations

import argparse
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

TOOLS = Path(__file__).resolve().parent
RIG_USER = "castd-rig"
REQUIRED = ["mutter", "pipewire", "wireplumber", "dbus-daemon", "gst-launch-1.0"]
SHELL = "gnome-shell"
XK_ESCAPE = 0xff1b
PORTAL = "/usr/libexec/xdg-desktop-portal"
PORTAL_GNOME = "/usr/libexec/xdg-desktop-portal-gnome"


def missing_portal() -> list[str]:
    """What this machine lacks to run the real GNOME ScreenCast portal in a rig."""
    return [p for p in (PORTAL, PORTAL_GNOME) if not os.access(p, os.X_OK)]


def missing_shell() -> list[str]:
    """What this machine lacks to run a rig with `shell=True` (Debian's gnome-shell package)."""
    return [] if shutil.which(SHELL) else [SHELL]


SHELL_PANEL = 32   # GNOME Shell 43's top bar: windows are centred in the work area below it


def portal_dialog_accept(width: int, height: int, top: int = 0) -> list[tuple[float, float]]:
    """Where to click in xdg-desktop-portal-gnome 43's "Screen Share" dialog, centred on a WxH monitor (or on the
    work area below `top` pixels of panel, SHELL_PANEL with GNOME Shell): the first row of its list (the monitor,
    or the first window), then the Share button of the header bar. Measured on 1280x720 (dialog 520x300)."""
    cx, cy = width / 2, top + (height - top) / 2
    return [(cx, cy + 25), (cx + 212, cy - 128)]


def missing_tools() -> list[str]:
    """What this machine lacks to run a rig (empty when it can)."""
    missing = [t for t in REQUIRED if shutil.which(t) is None]
    probe = subprocess.run(["/usr/bin/python3", "-c", "import gi, cairo; gi.require_version('Gtk', '3.0');"
                            "from gi.repository import Gtk"], capture_output=True)
    if probe.returncode != 0:
        missing.append("python3-gi, python3-gi-cairo, gir1.2-gtk-3.0")
    return missing


def rig_account() -> pwd.struct_passwd:
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid())
    try:
        return pwd.getpwnam(RIG_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--create-home", "--shell", "/usr/sbin/nologin", RIG_USER],
                       check=True)
        return pwd.getpwnam(RIG_USER)


class MutterRig:
    def __init__(self, width: int = 1280, height: int = 720, portal: bool = False, shell: bool = False,
                 pattern_window: tuple[int, int] | None = None):
        self.width, self.height = width, height
        self.portal = portal
        self.shell = shell
        self.pattern_window = pattern_window
        self.account = rig_account()
        self.runtime_dir = ""
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}

    # ------------------------------------------------------------ processes

    def env(self) -> dict[str, str]:
        """The environment of a client of this rig (run it as `self.account`, see `as_user`)."""
        return {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": self.account.pw_dir,
            "USER": self.account.pw_name,
            "XDG_RUNTIME_DIR": self.runtime_dir,
            "DBUS_SESSION_BUS_ADDRESS": f"unix:path={self.runtime_dir}/bus",
            "WAYLAND_DISPLAY": "wayland-0",
            "XDG_SESSION_TYPE": "wayland",
            "GDK_BACKEND": "wayland",
            "NO_AT_BRIDGE": "1",
        } | ({
            "XDG_CURRENT_DESKTOP": "GNOME",
            "XDG_DATA_HOME": f"{self.runtime_dir}/data",
            "XDG_CONFIG_HOME": f"{self.runtime_dir}/config",
            "XDG_CACHE_HOME": f"{self.runtime_dir}/cache",
        } if self.portal else {}) | ({
            "DBUS_SYSTEM_BUS_ADDRESS": f"unix:path={self.runtime_dir}/system_bus",
        } if self.shell else {})

    def as_user(self, argv: list[str]) -> list[str]:
        if os.geteuid() != 0:
            return argv
        return ["setpriv", f"--reuid={self.account.pw_uid}", f"--regid={self.account.pw_gid}",
                "--init-groups", "--"] + argv

    def spawn(self, name: str, argv: list[str], stdout=None) -> subprocess.Popen:
        log = Path(self.runtime_dir) / f"{name}.log"
        self.logs[name] = log
        err = open(log, "wb")
        p = subprocess.Popen(self.as_user(argv), env=self.env(), stdout=stdout or err, stderr=err,
                             start_new_session=True)
        self.procs[name] = p
        return p

    def wait_for(self, what: str, ready, seconds: float = 20.0):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if ready():
                return
            dead = [n for n, p in self.procs.items() if p.poll() is not None]
            if dead:
                raise RuntimeError(f"{', '.join(dead)} exited while waiting for {what}: {self.tail(dead[0])}")
            time.sleep(0.05)
        raise RuntimeError(f"timed out waiting for {what}")

    def tail(self, name: str, lines: int = 8) -> str:
        try:
            return "\n".join(self.logs[name].read_text(errors="replace").splitlines()[-lines:])
        except (KeyError, OSError):
            return ""

    def bus_has(self, name: str) -> bool:
        r = subprocess.run(self.as_user(["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus",
                                         "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner",
                                         f"string:{name}"]),
                           env=self.env(), capture_output=True, text=True)
        return r.returncode == 0 and "boolean true" in r.stdout

    # ------------------------------------------------------------ lifecycle

    def start(self, animate: bool = True) -> "MutterRig":
        self.runtime_dir = tempfile.mkdtemp(prefix="castd-rig-")
        os.chown(self.runtime_dir, self.account.pw_uid, self.account.pw_gid)
        os.chmod(self.runtime_dir, 0o700)
        # The rig's user may not be able to read the checkout (a clone under /root): copy its two clients.
        for script in ("wayland_pattern.py", "mutter_screencast.py", "mutter_click.py"):
            shutil.copy(TOOLS / script, Path(self.runtime_dir) / script)
            os.chmod(Path(self.runtime_dir) / script, 0o755)
        try:
            self.start_session_services()
            if self.shell:
                self.start_shell()
            else:
                self.spawn("mutter", ["mutter", "--headless", "--virtual-monitor", f"{self.width}x{self.height}",
                                      "--wayland", "--no-x11"])
                self.wait_for("mutter's ScreenCast service", lambda: self.bus_has("org.gnome.Mutter.ScreenCast"), 30)
            self.start_pattern(animate)
            if self.shell:
                self.click([XK_ESCAPE])   # out of the overview GNOME Shell starts in
            if self.portal:
                self.start_portal("portal-gnome", [PORTAL_GNOME], "gnome")
        except BaseException:
            self.stop()
            raise
        return self

    def start_session_services(self) -> None:
        """The rig's session bus, pipewire and wireplumber (the first processes of every rig)."""
        bus = Path(self.runtime_dir) / "bus"
        self.spawn("dbus", ["dbus-daemon", "--session", f"--address=unix:path={bus}", "--nofork", "--nopidfile"])
        self.wait_for("the session bus", bus.exists)
        self.spawn("pipewire", ["pipewire"])
        self.wait_for("pipewire", lambda: (Path(self.runtime_dir) / "pipewire-0").exists())
        self.spawn("wireplumber", ["wireplumber"])

    def start_shell(self) -> None:
        """A private, empty system bus, then GNOME Shell; ready once it says it started and serves Introspect."""
        conf = Path(self.runtime_dir) / "system-bus.conf"
        conf.write_text((TOOLS / "private-session-bus.conf").read_text()
                        .replace("@DIR@/bus", "@DIR@/system_bus").replace("@DIR@", self.runtime_dir))
        conf.chmod(0o644)
        bus = Path(self.runtime_dir) / "system_bus"
        self.spawn("system-bus", ["dbus-daemon", f"--config-file={conf}", "--nofork", "--nopidfile"])
        self.wait_for("the rig's system bus", bus.exists)
        self.spawn("shell", [SHELL, "--headless", "--virtual-monitor", f"{self.width}x{self.height}",
                             "--wayland", "--no-x11"])
        self.wait_for("GNOME Shell", lambda: "GNOME Shell started" in self.logs["shell"].read_text(errors="replace")
                      and self.bus_has("org.gnome.Shell.Introspect") and self.bus_has("org.gnome.Mutter.ScreenCast"),
                      60)

    def start_pattern(self, animate: bool) -> None:
        """castd's test picture on the rig's Wayland display: fullscreen, or in a window of `pattern_window`."""
        size = ["--window", "%dx%d" % self.pattern_window] if self.pattern_window else []
        self.pattern = self.spawn("pattern", ["/usr/bin/python3", f"{self.runtime_dir}/wayland_pattern.py"]
                                  + ([] if animate else ["--static"]) + size, stdout=subprocess.PIPE)
        line = self.pattern.stdout.readline()
        if b"drawing on wayland" not in line:
            raise RuntimeError(f"the pattern client did not start: {self.tail('pattern')}")

    def start_portal(self, name: str, backend: list[str], desktop: str) -> None:
        """A portal backend (`argv`), once its org.freedesktop.impl.portal.desktop.<desktop> name is on the bus,
        then xdg-desktop-portal itself."""
        self.spawn(name, backend)
        self.wait_for(name, lambda: self.bus_has(f"org.freedesktop.impl.portal.desktop.{desktop}"), 20)
        self.spawn("portal", [PORTAL])
        self.wait_for("xdg-desktop-portal", lambda: self.bus_has("org.freedesktop.portal.Desktop"), 20)

    def click(self, points: list[tuple[float, float] | int]) -> None:
        """Left-clicks at each (x, y) of the monitor through org.gnome.Mutter.RemoteDesktop; an int in `points` is a
        keysym to press and release instead (e.g. XK_ESCAPE)."""
        argv = ["/usr/bin/python3", f"{self.runtime_dir}/mutter_click.py"] + [
            a for p in points for a in ([f"key={p:#x}"] if isinstance(p, int) else [f"{v:g}" for v in p])]
        r = subprocess.run(self.as_user(argv), env=self.env(), capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            raise RuntimeError(f"clicking failed: {r.stderr[-500:]}")

    def give(self, path: Path) -> None:
        """Makes a tree the rig user's (e.g. castd's credentials written by a root `castd pair`)."""
        if os.geteuid() != 0:
            return
        for root, dirs, files in os.walk(path):
            for name in [root] + [os.path.join(root, n) for n in dirs + files]:
                os.chown(name, self.account.pw_uid, self.account.pw_gid)

    def castd_env(self, castd: dict[str, str]) -> dict[str, str]:
        """The rig's client environment plus castd's backend settings (CASTD_*, XDG_STATE_HOME) from `castd`."""
        env = {k: v for k, v in castd.items() if k.startswith("CASTD_") or k == "XDG_STATE_HOME"}
        env.update(self.env())
        return env

    def screencast(self, cursor_mode: int = 1) -> int:
        """A new Mutter screen cast of the monitor; its PipeWire node id."""
        p = self.spawn(f"screencast{len(self.procs)}", ["/usr/bin/python3", f"{self.runtime_dir}/mutter_screencast.py",
                                                         "--cursor-mode", str(cursor_mode)], stdout=subprocess.PIPE)
        line = p.stdout.readline().decode()
        if not line.startswith("node "):
            raise RuntimeError(f"no screen-cast node: {self.tail(list(self.procs)[-1])}")
        return int(line.split()[1])

    def grab(self, node: int, count: int = 2, timeout: float = 20.0) -> list[np.ndarray]:
        """`count` consecutive RGB frames of a PipeWire node, read by GStreamer (not castd)."""
        out = Path(self.runtime_dir) / f"grab-{node}"
        out.mkdir(exist_ok=True)
        os.chown(out, self.account.pw_uid, self.account.pw_gid)
        argv = ["gst-launch-1.0", "-q", "pipewiresrc", f"path={node}", f"num-buffers={count}", "!", "videoconvert",
                "!", f"video/x-raw,format=RGB,width={self.width},height={self.height}", "!",
                "multifilesink", f"location={out}/f%d.rgb"]
        subprocess.run(self.as_user(argv), env=self.env(), check=True, timeout=timeout, capture_output=True)
        frames = []
        for i in range(count):
            raw = np.fromfile(out / f"f{i}.rgb", dtype=np.uint8)
            frames.append(raw.reshape(self.height, self.width, 3))
        return frames

    def stop(self):
        for name in reversed(list(self.procs)):
            p = self.procs[name]
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in self.procs.values():
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            if p.stdout:
                p.stdout.close()
        self.procs.clear()
        if self.runtime_dir:
            shutil.rmtree(self.runtime_dir, ignore_errors=True)
            self.runtime_dir = ""

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description="Start a headless Mutter rig and keep it until Ctrl-C.")
    ap.add_argument("--size", default="1280x720")
    ap.add_argument("--static", action="store_true", help="draw the picture once (a damage-free screen)")
    ap.add_argument("--portal", action="store_true", help="also run xdg-desktop-portal with xdg-desktop-portal-gnome")
    ap.add_argument("--shell", action="store_true", help="run GNOME Shell instead of plain mutter")
    ap.add_argument("--window", metavar="WxH", help="draw the picture in a WxH window, not fullscreen")
    args = ap.parse_args()
    missing = missing_tools() + (missing_shell() if args.shell else [])
    if missing:
        print(f"cannot start a rig; missing: {', '.join(missing)} (Scripts/bootstrap installs them)", file=sys.stderr)
        return 1
    w, h = (int(v) for v in args.size.split("x"))
    window = tuple(int(v) for v in args.window.split("x")) if args.window else None
    rig = MutterRig(w, h, portal=args.portal, shell=args.shell, pattern_window=window).start(animate=not args.static)
    print(f"# headless {'GNOME Shell' if args.shell else 'Mutter'} {w}x{h} running as {rig.account.pw_name}; its environment:")
    for k, v in rig.env().items():
        print(f"export {k}={v}")
    sys.stdout.flush()
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        rig.stop()
    return 0


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    sys.exit(main())
