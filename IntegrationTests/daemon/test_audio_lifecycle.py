"""Desktop audio is captured only while a peer takes it (issue 18): castd --session probes
the sink at start (to know whether to offer audio) and closes that stream again; while it
waits for the receiver's answer there is no castd capture node in PipeWire; the answer
accepting audio opens it; the peer ending closes it. aiortc answers (it accepts the Opus
m-line); a private PipeWire with a virtual sink plays a tone. ~20 s."""
import asyncio
import json
import subprocess

import pytest

from castkit.audio_rig import PipeWireAudioRig, installed, write_tone
from castkit.castd_proc import Daemon, castd_env, pair

pytestmark = pytest.mark.skipif(not installed(), reason="pipewire, wireplumber or pw-play missing (Scripts/bootstrap)")


def castd_capture_nodes(rig: PipeWireAudioRig) -> int:
    """How many castd audio capture nodes the rig's PipeWire has now (pw-dump)."""
    out = subprocess.run(["pw-dump"], env=rig.spawn_env(), capture_output=True, timeout=10, check=True).stdout
    return sum(1 for o in json.loads(out) if o.get("type") == "PipeWire:Interface:Node"
               and (o.get("info") or {}).get("props", {}).get("node.name") == "castd-audio")


def events(daemon: Daemon, name: str) -> list[str]:
    return [l for l in daemon.stderr_lines if f"event={name}" in l]


@pytest.mark.timeout(90)
async def test_audio_is_captured_only_while_a_peer_takes_it(stack, tmp_path):
    from castkit.receiver_answerer import ReceiverAnswerer
    rig = await PipeWireAudioRig().start()
    wav = tmp_path / "tone.wav"
    write_tone(wav, 1000, 0.5, seconds=80)
    rig.play(wav)
    rx, rc, _, raw = await pair(stack, tmp_path)
    assert rc == 0, raw
    sid = rx.session["sessionId"]
    daemon = await Daemon.start(castd_env(stack, tmp_path, **rig.env()), sid)
    answerer = None
    try:
        await daemon.wait_log("event=audio_available", timeout=20)
        # No receiver yet: castd waits. Watch for 2 s that no capture node appears.
        seen = []
        for _ in range(8):
            seen.append(castd_capture_nodes(rig))
            await asyncio.sleep(0.25)
        assert seen == [0] * 8 and not events(daemon, "audio_started"), "\n".join(daemon.stderr_lines[-30:])

        heard = asyncio.Event()

        class Listening(ReceiverAnswerer):
            """Reads the audio track, so the test ends the peer only once audio has arrived."""
            def _on_audio_track(self, track):
                async def listen():
                    try:
                        await track.recv()
                        heard.set()
                        while True:
                            await track.recv()
                    except Exception:
                        return
                self._tasks.append(asyncio.create_task(listen()))

        answerer = Listening(rx.client, sid)
        await answerer.start()
        await daemon.wait_log("event=audio_started", timeout=30)
        assert castd_capture_nodes(rig) == 1
        lines = daemon.stderr_lines
        negotiated = next(i for i, l in enumerate(lines) if "event=audio_negotiated" in l)
        started = next(i for i, l in enumerate(lines) if "event=audio_started" in l)
        assert negotiated < started   # capture starts after the answer took audio, never before

        # Audio reaches the receiver (the peer takes it: capture must deliver frames) …
        await asyncio.wait_for(heard.wait(), 20)
        # … then the receiver ends the session: the peer goes, and the capture stream with it.
        await rx.client.api("session-end", {"sessionId": sid})
        await daemon.wait_log("event=audio_stopped", timeout=15)
        stopped = events(daemon, "audio_stopped")[0]
        frames = int(stopped.split("frames=")[1].split()[0])
        assert frames > 0
        assert castd_capture_nodes(rig) == 0
        rc, _ = await daemon.wait(timeout=10)
        assert rc == 0
    finally:
        await daemon.kill()
        if answerer:
            await answerer.close()
        await rx.client.close()
        rig.stop()
