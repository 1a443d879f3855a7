"""castd doctor on this machine: XShm available under Xvfb, no VA-API (no render node), x264 used."""
import json
import os

from castd_proc import run_castd
from xscreen import XScreen


async def test_doctor_under_xvfb_reports_xshm_and_x264(tmp_path):
    screen = await XScreen(2560, 1440).start(animate=False)
    try:
        # No session bus: the portal must be reported missing (an installed,
        # activatable xdg-desktop-portal would otherwise be started by the probe).
        env = dict(os.environ, DISPLAY=screen.display, DBUS_SESSION_BUS_ADDRESS="unix:path=/nonexistent/castd-bus")
        env.pop("WAYLAND_DISPLAY", None)
        rc, out, err = await run_castd(env, "doctor", "--json")
        text_rc, text, _ = await run_castd(env, "doctor")
    finally:
        screen.stop()
    assert rc == 0 and text_rc == 0, err
    r = json.loads(out)
    backends = {c["name"]: c for c in r["captureBackends"]}
    encoders = {c["name"]: c for c in r["encoders"]}
    assert backends["xshm"]["available"] and "2560x1440" in backends["xshm"]["detail"]
    assert not backends["portal"]["available"] and "session bus" in backends["portal"]["detail"]
    assert not encoders["vaapi"]["available"] and "render node" in encoders["vaapi"]["detail"]
    assert encoders["x264"]["available"]
    assert r["willUse"] == {"capture": "xshm", "encoder": "x264"}
    assert r["screen"] == {"width": 2560, "height": 1440}
    assert "encoded as 1920x1080 at up to 30 fps, 4000 kbps" in text


async def test_doctor_without_a_display_says_so_and_fails():
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    rc, out, err = await run_castd(env, "doctor")
    assert rc == 1
    assert "DISPLAY is not set" in out
    assert "will use: capture none" in out
