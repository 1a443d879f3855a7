"""Scripts/faults rows for desktop audio (issue 18): castd --session with a private
PipeWire playing a 1 kHz tone, to the stack's viewer in headless Chromium.

The first rows run one test of IntegrationTests/daemon/test_cast_audio_chromium.py each
in a child pytest (its own stack, PipeWire, Xvfb and Chromium, all on loopback) and
report what it printed. The loss rows run in the fault world (castd's namespace, the TUN
router, Chromium in the receiver's namespace): 5 % random loss on the media path, Opus
in-band FEC on (castd's default) and off (`CASTD_TEST_OPUS_FEC=off`), and Chromium's
audio concealment over the impaired window. Scripts/faults.py appends `rows()` to its
scenarios (full set only).
"""
from __future__ import annotations

import asyncio
import os
import re
import sys
import time
from pathlib import Path

from castkit.paths import REPO
from castkit.faults.world import LOSSY, Result, World, casting, check, delta

TESTS = REPO / "IntegrationTests" / "daemon" / "test_cast_audio_chromium.py"


async def audio_loss(w: World, name: str, seconds: float, fec: bool, **impair) -> Result:
    """Chromium's audio concealment while the router drops `impair['loss']` of the packets,
    with castd's Opus in-band FEC on or off. Passes when audio keeps flowing (at least 90 %
    of the window's samples received) and castd keeps running; the concealment is the figure."""
    from castkit.audio_rig import PipeWireAudioRig, write_tone
    from castkit.faults.loss import impaired_window
    desc = ", ".join(f"{k}={v}" for k, v in impair.items())
    r = Result(name, "audio keeps playing under 5 % loss; Chromium's concealedSamples and concealmentEvents "
                     f"over the window are the figures (FEC {'on' if fec else 'off'})")
    rig = await PipeWireAudioRig().start()
    try:
        wav = w.out / f"{name.replace(' ', '_').replace('%', 'pct').replace(':', '')}.wav"
        write_tone(wav, 1000, 0.5, seconds=seconds + 120)
        rig.play(wav)
        env = {**rig.env(), **({} if fec else {"CASTD_TEST_OPUS_FEC": "off"})}
        async with casting(w, name, chromium=True, extra_env=env) as c:
            win = await impaired_window(w, c, seconds, impair)
            a0, a1 = (win.before["stats"] or {}).get("audio") or {}, (win.after["stats"] or {}).get("audio") or {}
            span = (win.after["stats"]["at"] - win.before["stats"]["at"]) / 1000
            alive = c.daemon.proc.returncode is None
            fec_logged = bool(c.log_lines("event=audio_started")) and all(
                f"fec={'true' if fec else 'false'}" in l for l in c.log_lines("event=audio_started"))
            plans = [s.get("audio_loss_plan") for s in win.stats if s.get("audio_loss_plan") is not None]
    finally:
        rig.stop()
    received = a1.get("totalSamplesReceived", 0) - a0.get("totalSamplesReceived", 0)
    concealed = a1.get("concealedSamples", 0) - a0.get("concealedSamples", 0)
    figs = {"fec": fec, "impairment": desc, "window_s": round(span, 1), "samples_received": received,
            "concealed_samples": concealed, "concealed_percent": round(100 * concealed / max(received, 1), 2),
            "concealment_events": a1.get("concealmentEvents", 0) - a0.get("concealmentEvents", 0),
            "audio_packets_received": a1.get("packetsReceived", 0) - a0.get("packetsReceived", 0),
            "audio_packets_lost": a1.get("packetsLost", 0) - a0.get("packetsLost", 0),
            "castd_loss_plan_percent": max(plans) if plans else None, "router_lost": win.router_lost,
            "castd_audio_sent": delta(win.stats, "audio_sent"), "fec_as_asked": fec_logged}
    ok = alive and fec_logged and received >= 0.9 * 48_000 * span
    return check(r, ok, f"{figs['concealed_percent']} % of {received} samples concealed "
                        f"({figs['concealment_events']} concealment events, {figs['audio_packets_lost']} of "
                        f"{figs['audio_packets_received'] + figs['audio_packets_lost']} audio packets lost), "
                        f"castd planned for {figs['castd_loss_plan_percent']} % loss", **figs)


def rows() -> list[tuple]:
    """The audio rows in Scripts/faults' SCENARIOS shape."""

    async def pytest_row(w, name: str, test: str, expected: str):
        r = Result(name, expected, "")
        out = w.out / name
        out.mkdir(parents=True, exist_ok=True)
        t = time.monotonic()
        # The child runs in castd's namespace of the fault world ("ip netns exec", which remounts
        # /sys and so hides the cgroup2 mount a Guard of its own would need). That namespace has
        # no route off the machine and the whole run is in the faults' Guard cgroup, so it is
        # the confinement, as the receiver's namespace is for the Chromium rows.
        from castkit.confine import CONFINED_ENV, confined_env_value
        env = dict(os.environ, **{CONFINED_ENV: confined_env_value(w.ns_c)})
        p = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", f"{TESTS}::{test}",
            cwd=str(REPO), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        text, _ = await asyncio.wait_for(p.communicate(), 300)
        log = text.decode(errors="replace")
        (out / "pytest.log").write_text(log)
        figures = {"seconds": round(time.monotonic() - t, 1)}
        m = re.search(r"received (\d+) samples, concealed (\d+) \(([\d.]+) %\)", log)
        if m:
            figures.update(samples_received=int(m[1]), concealed=int(m[2]), concealed_percent=float(m[3]))
        passed = p.returncode == 0
        tail = next((l for l in reversed(log.splitlines()) if " passed" in l or " failed" in l or "error" in l), "")
        observed = (f"{figures.get('concealed_percent', '?')} % of {figures.get('samples_received', '?')} samples concealed; "
                    if m else "") + (tail.strip("= ") or f"pytest exited {p.returncode}")
        return check(r, passed, observed, **figures)

    return [
        ("audio: Chromium plays the tone", False, pytest_row,
         ("audio: Chromium plays the tone", "test_chromium_plays_castds_desktop_audio_with_little_concealment",
          "totalSamplesReceived rises, concealedSamples < 2 % on a clean link, stereo=1 kept, a level"), {}),
        ("audio: viewer rejects audio", False, pytest_row,
         ("audio: viewer rejects audio", "test_a_viewer_rejecting_audio_still_gets_video",
          "audio m-line answered inactive: one audio_rejected line, video decodes"), {}),
        ("audio: --audio off", False, pytest_row,
         ("audio: --audio off", "test_audio_off_offers_video_only", "no audio m-line offered, video decodes"), {}),
        ("audio: 5% loss, FEC on", False, audio_loss, ("audio: 5% loss, FEC on", 30, True), {**LOSSY, "loss": 0.05}),
        ("audio: 5% loss, FEC off", False, audio_loss, ("audio: 5% loss, FEC off", 30, False), {**LOSSY, "loss": 0.05}),
    ]
