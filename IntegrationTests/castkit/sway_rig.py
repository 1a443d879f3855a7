"""A headless Sway session with the real xdg-desktop-portal-wlr, for castd's portal path on wlroots (issue 31).

Like the Mutter rig (castkit/mutter_rig.py, whose process handling it reuses), as the unprivileged user
`castd-rig` (Sway refuses to run as root): a private session `dbus-daemon`, `pipewire`, `wireplumber`, then

    sway -c CONFIG              WLR_BACKENDS=headless WLR_RENDERER=pixman WLR_LIBINPUT_NO_DEVICES=1
    wayland_pattern.py          castd's test picture, fullscreen
    xdg-desktop-portal-wlr      [screencast] chooser_type=none, output_name=HEADLESS-1 (no dialog to click);
                                XDPW_PERSIST_MODE=permanent (0.7 hands out restore tokens only with it)
    xdg-desktop-portal          XDG_CURRENT_DESKTOP=sway picks wlr.portal

The workaround this rig needs, and nothing but the rig: xdg-desktop-portal-wlr 0.7 refuses to start a cast
("wlroots: unable to receive a valid format from wlr_screencopy") unless a screencopy frame announced a DMA-BUF
format, which Sway's software (pixman) renderer never does (upstream issue 289; 0.7 tests its own interface
version where it means screencopy's). The rig builds `xdpw_shm_shim.c` with `cc` and LD_PRELOADs it into
xdg-desktop-portal-wlr only: when the portal listens to a screencopy frame, the shim calls the portal's own
`linux_dmabuf` handler right after the real `buffer` event, with the same format and size. Sway offers no
zwp_linux_dmabuf_v1 (no modifiers), so the portal then offers PipeWire shared-memory (MemFd) buffers only and
copies frames with wl_shm, as it would without DMA-BUF. Sway, PipeWire and castd run unchanged; a desktop
whose compositor offers DMA-BUF needs no shim.

The portal's XDG homes are in the rig's runtime directory, so its permission store (where the ScreenCast
restore data lives) starts empty for each rig.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from castkit.mutter_rig import PORTAL, TOOLS, MutterRig

PACKAGES = ["sway", "xdg-desktop-portal-wlr"]
PORTAL_WLR = "/usr/libexec/xdg-desktop-portal-wlr"


def missing() -> list[str]:
    """What this machine lacks to run a Sway rig (empty when it can)."""
    out = [t for t in ("sway", "pipewire", "wireplumber", "dbus-daemon", "cc") if shutil.which(t) is None]
    out += [p for p in (PORTAL, PORTAL_WLR) if not os.access(p, os.X_OK)]
    return out


def install_packages() -> str:
    """Installs Sway and xdg-desktop-portal-wlr with apt when run as root and they are missing (the long test
    set's machines; CI does not run this rig). Returns what happened, for a skip message."""
    if not missing():
        return "installed"
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return f"not root or no apt-get: install {' '.join(PACKAGES)} yourself"
    r = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES],
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"), capture_output=True, text=True,
                       timeout=600)
    return "installed" if r.returncode == 0 else f"apt-get install failed: {r.stderr.strip()[-300:]}"


class SwayRig(MutterRig):
    OUTPUT = "HEADLESS-1"

    def env(self) -> dict[str, str]:
        # The Mutter rig's client environment (self.portal is False: no GNOME keys), on Sway's display.
        return super().env() | {
            "WAYLAND_DISPLAY": "wayland-1",
            "XDG_CURRENT_DESKTOP": "sway",
            "XDG_DATA_HOME": f"{self.runtime_dir}/data",
            "XDG_CONFIG_HOME": f"{self.runtime_dir}/config",
            "XDG_CACHE_HOME": f"{self.runtime_dir}/cache",
        }

    def start(self, animate: bool = True) -> "SwayRig":
        self.runtime_dir = tempfile.mkdtemp(prefix="castd-sway-rig-")
        rt = Path(self.runtime_dir)
        os.chmod(rt, 0o700)
        shutil.copy(TOOLS / "wayland_pattern.py", rt / "wayland_pattern.py")
        # The workaround (see the module's note), built here and preloaded into the portal only.
        subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(rt / "xdpw_shm_shim.so"),
                        str(TOOLS / "xdpw_shm_shim.c"), "-ldl"], check=True, capture_output=True)
        (rt / "sway.conf").write_text(
            f"output {self.OUTPUT} resolution {self.width}x{self.height} position 0 0\n"
            "default_border none\nfocus_follows_mouse no\n")
        wlr = rt / "config" / "xdg-desktop-portal-wlr"
        wlr.mkdir(parents=True)
        (wlr / "config").write_text(f"[screencast]\nchooser_type=none\noutput_name={self.OUTPUT}\n")
        for d in ("data", "cache"):
            (rt / d).mkdir()
        for root, dirs, files in os.walk(rt):
            for n in [root] + [os.path.join(root, x) for x in dirs + files]:
                os.chown(n, self.account.pw_uid, self.account.pw_gid)
        try:
            self.start_session_services()
            self.spawn("sway", ["env", "WLR_BACKENDS=headless", "WLR_RENDERER=pixman", "WLR_LIBINPUT_NO_DEVICES=1",
                                "WAYLAND_DISPLAY=", "sway", "-c", str(rt / "sway.conf")])
            self.wait_for("sway's Wayland socket", lambda: (rt / "wayland-1").exists(), 20)
            self.start_pattern(animate)
            # XDPW_PERSIST_MODE: xdg-desktop-portal-wlr 0.7 gives restore tokens only when told to (its variable).
            self.start_portal("portal-wlr", ["env", "XDPW_PERSIST_MODE=permanent", f"LD_PRELOAD={rt}/xdpw_shm_shim.so",
                                             PORTAL_WLR, "-l", "DEBUG"], "wlr")
        except BaseException:
            self.stop()
            raise
        return self
