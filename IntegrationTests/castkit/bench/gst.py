"""GStreamer for the bench: Debian's PyGObject bindings (python3-gst-1.0) made
importable from the project's virtual environment (same Python 3.11), and
the pipeline text with castd's x264 and libvpx settings."""
from __future__ import annotations

import os
import sys

_DIST = "/usr/lib/python3/dist-packages"
if os.path.isdir(_DIST) and _DIST not in sys.path:
    sys.path.append(_DIST)   # appended: the venv's own packages win

import gi  # noqa: E402

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402

Gst.init(None)

PRESET = "superfast"       # X264Encoder.defaultPreset
FPS = 30


def cap(width: int, height: int) -> tuple[int, int, int]:
    """castd's caps (spec §12): at most 1080p keeping the aspect ratio, even sides;
    4 Mbps above 720p, 2.5 Mbps at or below. Returns (width, height, kbps)."""
    w, h = width, height
    if w * h > 1920 * 1080:
        s = min(1920 / w, 1080 / h)
        w, h = int(w * s) // 2 * 2, int(h * s) // 2 * 2
    return w, h, (4000 if w * h > 1280 * 720 else 2500)


def x264(kbps: int, threads: int | None = None) -> str:
    """x264enc as castd sets up libx264 (X264Encoder.swift): preset + zerolatency,
    Constrained Baseline (caps below), CBR at the cap with a one-frame VBV buffer,
    no B-frames/lookahead, sliced threads (one slice per thread, ≤ 4), an infinite
    GOP without scene cuts, SPS/PPS before each IDR, Annex-B."""
    n = threads or max(1, min(4, os.cpu_count() or 1))
    vbv_ms = max(1, round(1000 / FPS))
    return (f"x264enc speed-preset={PRESET} tune=zerolatency pass=cbr bitrate={kbps} vbv-buf-capacity={vbv_ms} "
            f"bframes=0 rc-lookahead=0 sync-lookahead=0 sliced-threads=true threads={n} key-int-max=0 "
            f"byte-stream=true option-string=\"slices={n}:keyint=infinite:scenecut=0:repeat-headers=1\" "
            f"! video/x-h264,profile=constrained-baseline,stream-format=byte-stream,alignment=au")


def vp8(kbps: int) -> str:
    """vp8enc as castd sets up libvpx (VP8Encoder.Tuning's defaults): real time
    (deadline 1 µs = VPX_DL_REALTIME), cpu-used -10, one thread, CBR at the cap,
    no lag, error resilient, q 2…63, no frame dropping, static threshold 1, key
    frames only on request. (vp8enc has no screen-content property: castd's
    mode 1 has no GStreamer counterpart; the bench's VP8SpeedBench shows the
    mode changes the cost by little.)"""
    return (f"vp8enc deadline=1 cpu-used=-10 threads=1 end-usage=cbr target-bitrate={kbps * 1000} "
            "lag-in-frames=0 error-resilient=default min-quantizer=2 max-quantizer=63 dropframe-threshold=0 "
            "undershoot=100 overshoot=15 buffer-initial-size=500 buffer-optimal-size=600 buffer-size=1000 "
            "static-threshold=1 noise-sensitivity=0 max-intra-bitrate=300 keyframe-mode=disabled")


def source(display: str, width: int, height: int, *, use_damage: bool, colorimetry: str = "bt709") -> str:
    """ximagesrc → videoconvert (→ videoscale above 1080p) → I420 at 30 fps, BT.709
    (H.264, as castd) or BT.601 (`colorimetry="bt601"`: VP8, as castd)."""
    w, h, _ = cap(width, height)
    scale = "videoscale ! " if (w, h) != (width, height) else ""
    return (f"ximagesrc display-name={display} use-damage={'true' if use_damage else 'false'} show-pointer=true "
            f"! video/x-raw,framerate={FPS}/1 ! videoconvert name=convert ! {scale}"
            f"video/x-raw,format=I420,width={w},height={h},colorimetry={colorimetry}")


def opus(sink_name: str) -> str:
    """Desktop audio as castd captures and encodes it (issue 18; OpusAudioEncoder): the
    sink `sink_name`'s monitor from PipeWire (pipewiresrc with stream.capture.sink, as
    PipeWireAudioSource), 48 kHz stereo, opusenc with castd's libopus settings: 128 kbit/s,
    20 ms frames, OPUS_APPLICATION_AUDIO (audio-type=generic), constrained VBR (libopus's
    default, which castd keeps), complexity 10, in-band FEC on, DTX off. (castd also sets
    the signal type to music; opusenc has no such property and lets libopus detect it.)
    RFC 7587 §4.1: the RTP clock is 48 kHz whatever the content.

    always-copy: without it pipewiresrc (PipeWire 0.3.65's GStreamer plugin) hands out
    buffers wrapping PipeWire's own memory, which it takes back while opusenc's adapter
    still holds them (collecting 960-sample frames): the sender crashed (SIGSEGV in a
    memcpy under gst_adapter_map, on pipewiresrc's thread) in 4 of 5 bench rounds
    (none in 7 since)."""
    return (f"pipewiresrc target-object={sink_name} always-copy=true "
            "stream-properties=\"props,stream.capture.sink=true\" "
            "! audio/x-raw,rate=48000,channels=2 ! audioconvert ! audioresample "
            "! audio/x-raw,rate=48000,channels=2 "
            "! opusenc bitrate=128000 frame-size=20 audio-type=generic bitrate-type=constrained-vbr complexity=10 "
            "inband-fec=true dtx=false "
            "! rtpopuspay pt=111 ! application/x-rtp,media=audio,encoding-name=OPUS,payload=111,clock-rate=48000")
