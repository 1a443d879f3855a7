"""castd doctor on this machine: XShm available under Xvfb, no VA-API (no render node), x264 used."""
import json
import os

import pytest

from castkit.castd_proc import run_castd
from castkit.xscreen import XScreen


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
    dmabuf = "linear, CPU-mapped; tiled modifiers need a GPU importer: not built"
    assert r["dmabuf"] == dmabuf and f"  DMA-BUF: {dmabuf}\n" in text


async def test_doctor_without_a_display_says_so_and_fails():
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    rc, out, err = await run_castd(env, "doctor")
    assert rc == 1
    assert "DISPLAY is not set" in out
    assert "will use: capture none" in out


async def test_encoder_vaapi_without_a_render_node_refuses_to_start_with_a_sentence():
    # No /dev/dri here: --encoder vaapi has no fallback, so castd says why before signing in.
    assert not os.path.exists("/dev/dri/renderD128")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CASTD_")}
    rc, out, err = await run_castd(env, "--session", "00000000-0000-0000-0000-000000000000", "--encoder", "vaapi")
    assert rc == 69, (out, err)
    assert err.strip() == ("castd: --encoder vaapi: VA-API: no DRM render node (/dev/dri/renderD*) on this machine, "
                           "so no hardware encoder. Use --encoder auto to fall back to x264.")


async def test_doctor_with_an_audio_sink_reports_it_and_exits_cleanly():
    # Issue 18: with a sink present the audio probe opens a capture stream and closes it at
    # once. Its teardown used to race a PipeWire callback (the callback's release of the
    # source could be the last one, so deinit ran on PipeWire's thread and freed the event
    # tables under a live stream): about one run in four aborted with "malloc(): invalid
    # size". Several runs, each must exit 0 with the audio line and no abort.
    from castkit.audio_rig import PipeWireAudioRig, installed
    if not installed():
        pytest.skip("pipewire, wireplumber or pw-play missing (Scripts/bootstrap)")
    screen = await XScreen(640, 480).start(animate=False)
    rig = await PipeWireAudioRig().start(sink_description="doctor test sink")
    try:
        env = dict(os.environ, DISPLAY=screen.display, **rig.env())
        env.pop("WAYLAND_DISPLAY", None)
        runs = [await run_castd(env, "doctor", *(["--json"] if i % 2 else [])) for i in range(8)]
    finally:
        rig.stop()
        screen.stop()
    for rc, out, err in runs:
        assert rc == 0 and "malloc" not in err and "crashed" not in err, (rc, err[-2000:])
    assert all(json.loads(out)["audio"]["available"] is True for _, out, _ in runs[1::2])
    # Every text run names the rig's sink, the first one too: `PipeWireAudioRig.start` returns
    # only once WirePlumber has made that sink the default (before it did, the first run could
    # say "no node available").
    audio = [next((l.strip() for l in out.splitlines() if l.strip().startswith("audio:")), "") for _, out, _ in runs[0::2]]
    assert all('audio: PipeWire, the monitor of "doctor test sink", 48 kHz stereo F32' in a for a in audio), audio
