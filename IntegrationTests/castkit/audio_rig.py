"""Desktop audio for castd's tests (issue 18): a private session dbus-daemon,
pipewire and wireplumber in a fresh XDG_RUNTIME_DIR (the rig the capture tests
use), a virtual stereo sink (the null-audio-sink node) as the default, and
pw-play playing a known signal into it. castd, started with `env()`, captures
that sink's monitor. Stopped with SIGKILL, the directory removed.

Also the analysis the receivers' tests share: the dominant frequency and the
RMS level of what arrived."""
from __future__ import annotations

import asyncio
import pathlib
import shutil
import subprocess
import wave

import numpy as np

from castkit.pw_session import PrivateSession

RATE = 48_000


def installed() -> bool:
    return all(shutil.which(b) for b in ("pipewire", "wireplumber", "dbus-daemon", "pw-cli", "pw-play"))


def write_tone(path: pathlib.Path, frequency: float, amplitude: float, seconds: float,
               clicks_every: float | None = None) -> None:
    """A stereo 16-bit WAV: a sine of `frequency` at `amplitude` (full scale 1) on both
    channels; with `clicks_every`, silence with a 5 ms burst of the tone every that many seconds."""
    t = np.arange(int(seconds * RATE)) / RATE
    x = amplitude * np.sin(2 * np.pi * frequency * t)
    if clicks_every:
        x = np.where((t % clicks_every) < 0.005, x, 0.0)
    pcm = np.round(np.clip(x, -1, 1) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(np.repeat(pcm[:, None], 2, axis=1).tobytes())


def dominant_frequency(samples: np.ndarray, rate: int = RATE) -> float:
    """The frequency of the largest FFT bin (Hann window), refined by parabolic interpolation."""
    x = samples.astype(np.float64) * np.hanning(len(samples))
    mag = np.abs(np.fft.rfft(x))
    k = int(np.argmax(mag[1:])) + 1
    if 1 <= k < len(mag) - 1:
        a, b, c = np.log(mag[k - 1] + 1e-12), np.log(mag[k] + 1e-12), np.log(mag[k + 1] + 1e-12)
        k = k + 0.5 * (a - c) / (a - 2 * b + c)
    return k * rate / len(samples)


def rms_dbfs(samples: np.ndarray) -> float:
    """RMS level of float samples (full scale ±1) in dBFS (a full-scale sine is −3.01)."""
    r = float(np.sqrt(np.mean(np.square(samples.astype(np.float64)))))
    return 20 * np.log10(max(r, 1e-9))


class PipeWireAudioRig(PrivateSession):
    def __init__(self):
        super().__init__("castd-audio.")

    def env(self) -> dict:
        """What castd (or a tool) needs to reach this PipeWire: merge into the environment."""
        return {"XDG_RUNTIME_DIR": str(self.dir), "DBUS_SESSION_BUS_ADDRESS": self.bus,
                "PIPEWIRE_REMOTE": str(self.dir / "pipewire-0")}

    def spawn_env(self) -> dict:
        return {**super().spawn_env(), **self.env()}

    async def start(self, sink_description: str = "castd test sink") -> "PipeWireAudioRig":
        await self.start_session()
        # The only sink, hence the default one; it lingers after pw-cli exits.
        props = ("{ factory.name=support.null-audio-sink node.name=castd-test-sink "
                 f"node.description=\"{sink_description}\" media.class=Audio/Sink object.linger=true "
                 "audio.position=[FL FR] audio.rate=48000 }")
        for _ in range(50):   # pw-cli fails until pipewire takes connections
            r = subprocess.run(["pw-cli", "create-node", "adapter", props], env=self.spawn_env(), capture_output=True, timeout=10)
            if r.returncode == 0 and b"Error" not in r.stdout + r.stderr:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"pw-cli could not create the sink: {r.stdout!r} {r.stderr!r}")
        # The node exists now, but a stream finds it only once WirePlumber has made it the
        # default sink: a castd started before that failed with "no node available" (CI).
        for _ in range(100):
            m = subprocess.run(["pw-metadata", "-n", "default", "0", "default.audio.sink"], env=self.spawn_env(),
                               capture_output=True, timeout=10)
            if b"castd-test-sink" in m.stdout:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError(f"WirePlumber did not make the sink the default: {m.stdout!r} {m.stderr!r}")
        return self

    def play(self, wav: pathlib.Path) -> subprocess.Popen:
        """Plays a WAV into the default sink (pw-play; not realtime here)."""
        return self._spawn(["pw-play", str(wav)], f"play-{wav.stem}")
