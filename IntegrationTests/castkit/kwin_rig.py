"""A headless KDE Plasma (KWin) session with the real KDE ScreenCast portal, for tests.

One rig is what castkit/mutter_rig.py runs, with KWin in Mutter's place: a private session
`dbus-daemon`, `pipewire`, `wireplumber`, `kwin_wayland --virtual` (KWin's virtual
framebuffer backend, QPainter compositing: no GPU), castd's test picture drawn fullscreen
(castkit/wayland_pattern.py), `xdg-desktop-portal-kde` and `xdg-desktop-portal`
(XDG_CURRENT_DESKTOP=KDE, so the frontend picks the KDE backend for ScreenCast), all as the
rig user in a fresh runtime directory with empty XDG data/config homes.

Two facts of this machine shape it (docs/wayland.md, "KDE Plasma"):

- Debian ships /usr/bin/kwin_wayland with the file capability `cap_sys_resource=ep`. In a
  container whose bounding set lacks CAP_SYS_RESOURCE, execve of it fails with EPERM
  ("Operation not permitted") whoever runs it; the rig runs a plain copy (no capability:
  KWin only uses it to raise RLIMIT_NOFILE).
- KDE's ScreenCast dialog (a QML window: one card per screen, "Share", "Cancel") cannot be
  accepted by a test: the cards expose no accessibility action (AT-SPI shows them as
  "list item" with none), and nothing here injects input into KWin. `dialog()` reads the
  dialog through AT-SPI (the portal runs with QT_LINUX_ACCESSIBILITY_ALWAYS_ON=1), so a test
  can see that it is shown. The grant a person gives in that dialog is what
  `grant(token, output)` writes into the permission store instead: a restore token for the
  host application with KDE's restore data naming the output ("0x0", KDE's id of an output
  is its position), which xdg-desktop-portal-kde 5.27 honours without a dialog.

Needs root or the rig user, like MutterRig; `missing_kde()` says what the machine lacks.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from castkit.mutter_rig import PORTAL, TOOLS, MutterRig

KWIN = "/usr/bin/kwin_wayland"
PORTAL_KDE = "/usr/lib/x86_64-linux-gnu/libexec/xdg-desktop-portal-kde"
# What the KDE portal's ScreenCast dialog loads, and the Debian packages that carry it.
KDE_RUNTIME = [
    (KWIN, "kwin-wayland"),
    (PORTAL_KDE, "xdg-desktop-portal-kde"),
    (PORTAL, "xdg-desktop-portal"),
    ("/usr/lib/*/qt5/plugins/platforms/libqwayland-generic.so", "qtwayland5"),
    ("/usr/lib/*/qt5/qml/QtQuick/Layouts", "qml-module-qtquick-layouts"),
    ("/usr/lib/*/qt5/qml/QtQuick/Controls.2", "qml-module-qtquick-controls2"),
    ("/usr/lib/*/qt5/qml/org/kde/kirigami.2", "qml-module-org-kde-kirigami2"),
    ("/usr/lib/*/qt5/qml/org/kde/pipewire", "qml-module-org-kde-pipewire"),
    ("/usr/lib/*/qt5/qml/org/kde/taskmanager", "plasma-workspace"),
    ("/usr/lib/*/qt5/qml/org/kde/plasma/workspace/dialogs", "plasma-workspace"),
]


def missing_kde() -> list[str]:
    """The Debian packages this machine lacks to run a KWin rig with the KDE portal (empty when it can)."""
    missing = []
    for path, package in KDE_RUNTIME:
        if not glob.glob(path) and package not in missing:
            missing.append(package)
    return missing


class KWinRig(MutterRig):
    def __init__(self, width: int = 1280, height: int = 720):
        super().__init__(width, height, portal=True)

    def env(self) -> dict[str, str]:
        return super().env() | {
            "XDG_CURRENT_DESKTOP": "KDE",
            "QT_QPA_PLATFORM": "wayland",
            "KWIN_COMPOSE": "O2",   # OpenGL (Mesa llvmpipe): KWin 5.27 streams no frames when compositing with QPainter
            "QT_LINUX_ACCESSIBILITY_ALWAYS_ON": "1",
        }

    def wait_socket(self, name: str, seconds: float = 30.0) -> None:
        self.wait_for(name, lambda: (Path(self.runtime_dir) / name).exists(), seconds)

    def start(self, animate: bool = True) -> "KWinRig":
        self.runtime_dir = tempfile.mkdtemp(prefix="castd-kwin-rig-")
        run = Path(self.runtime_dir)
        os.chown(run, self.account.pw_uid, self.account.pw_gid)
        os.chmod(run, 0o700)
        for script in ("wayland_pattern.py", "kde_portal_tool.py"):
            shutil.copy(TOOLS / script, run / script)
            os.chmod(run / script, 0o755)
        shutil.copy(KWIN, run / "kwin_wayland")   # a copy without the file capability (see above)
        os.chown(run / "kwin_wayland", self.account.pw_uid, self.account.pw_gid)
        try:
            self.start_session_services()
            self.spawn("kwin", [f"{run}/kwin_wayland", "--virtual", "--no-lockscreen", "--no-global-shortcuts",
                                "--no-kactivities", "--width", str(self.width), "--height", str(self.height)])
            self.wait_socket("wayland-0")
            self.start_pattern(animate)
            self.start_portal("portal-kde", [PORTAL_KDE], "kde")
        except BaseException:
            self.stop()
            raise
        return self

    def tool(self, *args: str) -> str:
        r = subprocess.run(self.as_user(["/usr/bin/python3", f"{self.runtime_dir}/kde_portal_tool.py", *args]),
                           env=self.env(), capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"kde_portal_tool {args[0]} failed: {r.stderr[-500:]}")
        return r.stdout

    def grant(self, token: str, output: str = "0x0") -> None:
        """Writes what accepting KDE's dialog for `output` stores: a restore token for the host app."""
        self.tool("grant", token, output)

    def dialog(self) -> list[dict]:
        """The KDE portal's open ScreenCast dialogs, read through AT-SPI: for each, its title, its buttons and the
        accessible actions of its screen cards."""
        return json.loads(self.tool("dialog"))
