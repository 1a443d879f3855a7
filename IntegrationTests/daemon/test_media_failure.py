"""Issue 17: a media failure reaches the session, which reopens the encoder and the capture a
bounded number of times, then ends the cast cleanly. Faults come from CASTD_TEST_FAULT (a test-only
hook, `MediaFault`); the screen is Xvfb, the receiver aiortc through the local stack.

CI runs the same three faults as quick rows of Scripts/faults (castkit/faults/media.py), so these are
long rows (the full fault set runs them)."""
import contextlib
import time

import pytest

from castkit.castd_proc import answered_cast, castd_env
from castkit.xscreen import XScreen


@contextlib.asynccontextmanager
async def faulty_cast(stack, tmp_path, fault: str):
    """castd casting a small Xvfb screen to an aiortc answerer with CASTD_TEST_FAULT=`fault`."""
    screen = await XScreen(320, 240).start()
    try:
        env = castd_env(stack, tmp_path, DISPLAY=screen.display, CASTD_TEST_FAULT=fault)
        async with answered_cast(stack, tmp_path, env) as cast:
            yield cast
    finally:
        screen.stop()


async def frames_resume(answerer, daemon, after: str, more: int = 30, timeout: float = 20) -> float:
    """Waits for `after` in castd's log, then for `more` frames decoded after it; returns the
    seconds from the log line to the last of those frames."""
    await daemon.wait_log(after, timeout=timeout)
    t0 = time.monotonic()
    start = len(answerer.frames)
    await answerer.wait_frames(start + more, timeout=timeout)
    return time.monotonic() - t0


@pytest.mark.long
@pytest.mark.timeout(90)
async def test_an_encoder_that_fails_once_is_reopened_and_the_cast_goes_on(stack, tmp_path):
    async with faulty_cast(stack, tmp_path, "encoder-fail-once") as (answerer, daemon):
        await daemon.wait_log("event=encode_failed", timeout=40)
        took = await frames_resume(answerer, daemon, "event=media_restart")
        print(f"MEDIA encoder-fail-once: 30 frames {took:.1f} s after the restart")
        assert daemon.proc.returncode is None
        assert sum("event=media_restart" in l for l in daemon.stderr_lines) == 1
        daemon.signal()
        rc, _ = await daemon.wait(timeout=5)
        assert rc == 0


@pytest.mark.long
@pytest.mark.timeout(90)
async def test_an_encoder_that_never_starts_ends_the_cast_with_a_reason_and_exit_1(stack, tmp_path):
    async with faulty_cast(stack, tmp_path, "encoder-fail-always") as (answerer, daemon):
        t0 = time.monotonic()
        rc, out = await daemon.wait(timeout=40)
        took = time.monotonic() - t0
        print(f"MEDIA encoder-fail-always: exit {rc} after {took:.1f} s")
        assert rc == 1, "\n".join(daemon.stderr_lines[-20:])
        assert sum("event=media_restart" in l for l in daemon.stderr_lines) == 3
        assert any("gave up after 3 restarts" in l for l in daemon.stderr_lines)
        row = await answerer.signals.wait_row(lambda r: r["message_type"] == "disconnect", timeout=5)
        assert row["payload"] == {"reason": "media_failed"}
        await answerer.signals.wait_status("disconnected", timeout=5)


@pytest.mark.long
@pytest.mark.timeout(90)
async def test_a_capture_that_stalls_is_seen_and_reopened(stack, tmp_path):
    async with faulty_cast(stack, tmp_path, "capture-stall") as (answerer, daemon):
        await daemon.wait_log("event=media_stalled", timeout=40)
        at = {key: next(t for l, t in zip(daemon.stderr_lines, daemon.stderr_times) if key in l)
              for key in ("event=test_fault fault=capture-stall", "event=media_stalled")}
        seen = at["event=media_stalled"] - at["event=test_fault fault=capture-stall"]
        took = await frames_resume(answerer, daemon, "event=media_restart")
        print(f"MEDIA capture-stall: seen after {seen:.1f} s, 30 frames {took:.1f} s after the restart")
        assert 4 <= seen <= 10, seen   # 5 s without a frame, seen on a 1 s tick
        daemon.signal()
        rc, _ = await daemon.wait(timeout=5)
        assert rc == 0
