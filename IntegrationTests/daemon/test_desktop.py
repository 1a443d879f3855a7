"""castd visible and stoppable on a desktop (issue 30), against the local stack, an aiortc receiver,
an Xvfb screen and a private session bus: the notification a real notification service would show
(notification_standin.py records Notify and plays "Stop casting"), `castd status` and `castd stop`."""
import asyncio
import contextlib
import json
import os
import pathlib
import time

from castkit.castd_proc import answered_cast, castd_env, run_castd
from castkit.desktop_session import DesktopSession, Notifications
from castkit.xscreen import XScreen


async def until(find, what: str, timeout: float = 10):
    """Polls `find()` until it returns something truthy (which it returns)."""
    async def poll():
        while not (found := find()):
            await asyncio.sleep(0.05)
        return found
    try:
        return await asyncio.wait_for(poll(), timeout)
    except TimeoutError:
        raise AssertionError(f"no {what} within {timeout} s") from None


@contextlib.asynccontextmanager
async def desktop_cast(stack, tmp_path, notifications=True, daemon_args=(), actions=True):
    """A private desktop (bus, runtime dir, a notification service unless told not), an Xvfb
    screen and castd casting it to an aiortc receiver. Yields (desk, env, answerer, daemon, sid)."""
    desk = await DesktopSession().start(notifications=notifications, actions=actions)
    screen = await XScreen(640, 360).start()
    try:
        env = castd_env(stack, tmp_path, DISPLAY=screen.display, **desk.env())
        async with answered_cast(stack, tmp_path, env, *daemon_args) as (answerer, daemon):
            yield desk, env, answerer, daemon, answerer.signals.session_id, screen.display
    finally:
        screen.stop()
        desk.stop()


async def ends_cleanly(answerer, daemon):
    """The end SIGTERM gives: disconnect sender_ended, the session ended, castd exits 0."""
    row = await answerer.signals.wait_row(lambda r: r["message_type"] == "disconnect", timeout=5)
    assert row["payload"] == {"reason": "sender_ended"}
    await answerer.signals.wait_status("disconnected", timeout=5)
    rc, out = await daemon.wait(timeout=5)
    assert rc == 0, "\n".join(daemon.stderr_lines[-20:])
    assert "Cast stopped." in out


async def test_the_notification_says_the_screen_is_shared_and_stop_casting_ends_the_cast(stack, tmp_path):
    async with desktop_cast(stack, tmp_path) as (desk, env, answerer, daemon, sid, display):
        await answerer.wait_frames(5, timeout=40)
        shown = await until(lambda: [c for c in desk.calls("Notify") if c["actions"]], "Notify with an action")
        first = shown[0]
        assert first["app_name"] == "castd" and first["replaces_id"] == 0
        assert first["actions"] == ["stop", "Stop casting"]
        assert first["hints"]["resident"] is True
        # No PipeWire on this private desktop: video only, and the notice says just the screen.
        assert daemon.events("audio_unavailable") or daemon.events("audio_off")
        assert first["summary"] == "Sharing your screen"
        assert first["body"] == f"Your screen is being sent to the receiver of session {sid[:8]} (screen {display} (XShm))."
        t0 = time.monotonic()
        desk.choose_stop()
        await ends_cleanly(answerer, daemon)
        took = time.monotonic() - t0
        print(f"Stop casting -> disconnect row, end, castd exited: {took:.2f} s")
        assert took < 3.0   # SIGTERM's budget: the end rows within 2 s, plus the end notice
        assert daemon.events("stop_chosen", **{"from": "notification"})
        last = desk.calls("Notify")[-1]   # (the desktop's log goes when it stops)
        assert last["replaces_id"] == first["id"] and last["actions"] == [] and "resident" not in last["hints"]
        assert last["summary"] == "Casting stopped"
        assert last["body"] == f"You stopped casting; the receiver of session {sid[:8]} no longer receives your screen."
        assert len(desk.calls("Notify")) == 2


async def test_without_a_notification_service_the_cast_goes_on_and_says_so_once(stack, tmp_path):
    async with desktop_cast(stack, tmp_path, notifications=False) as (desk, env, answerer, daemon, sid, display):
        await answerer.wait_frames(30, timeout=40)
        daemon.signal()
        await ends_cleanly(answerer, daemon)
    lines = daemon.events("notifications_unavailable")
    assert len(lines) == 1, lines
    assert "org.freedesktop.Notifications" in lines[0]["reason"]


async def test_a_notification_service_without_actions_is_told_how_to_stop(stack, tmp_path):
    async with desktop_cast(stack, tmp_path, actions=False) as (desk, env, answerer, daemon, sid, display):
        await answerer.wait_frames(5, timeout=40)
        shown = await until(lambda: desk.calls("Notify"), "a notice")
        assert shown[0]["actions"] == [] and shown[0]["summary"] == "Sharing your screen"
        assert shown[0]["body"].endswith(f"(screen {display} (XShm)). To stop it: castd stop")
        assert len(daemon.events("notification_actions_unsupported")) == 1
        daemon.signal()
        await ends_cleanly(answerer, daemon)


async def test_no_notify_shows_nothing_on_a_desktop_that_has_a_notification_service(stack, tmp_path):
    async with desktop_cast(stack, tmp_path, daemon_args=("--no-notify",)) as (desk, env, answerer, daemon, sid, display):
        await answerer.wait_frames(30, timeout=40)
        daemon.signal()
        await ends_cleanly(answerer, daemon)
        assert desk.calls() == []
        assert len(daemon.events("notifications_off")) == 1 and not daemon.events("notifications_unavailable")


async def test_status_lists_the_cast_and_stop_ends_it_cleanly(stack, tmp_path):
    async with desktop_cast(stack, tmp_path) as (desk, env, answerer, daemon, sid, display):
        await answerer.wait_frames(5, timeout=40)
        registry = pathlib.Path(env["XDG_RUNTIME_DIR"]) / "castd"
        assert oct(registry.stat().st_mode & 0o777) == "0o700"
        assert oct((registry / f"{sid}.json").stat().st_mode & 0o777) == "0o600"
        # A stale entry: a live pid that is not castd (this test's own). status prunes it.
        stale = "11111111-2222-4333-8444-555555555555"
        (registry / f"{stale}.json").write_text(json.dumps({
            "pid": os.getpid(), "sessionId": stale, "startedAt": "2026-01-01T00:00:00Z", "state": "casting",
            "sharing": "screen :0 (XShm)", "audio": False, "version": "0"}))

        async def casting():
            rc, out, err = await run_castd(env, "status", "--json")
            assert rc == 0, err
            casts = json.loads(out)["casts"]
            return casts if casts and casts[0]["state"] == "casting" else None
        casts = None
        for _ in range(100):   # the registry says casting once the controller has seen the connection
            casts = await casting()
            if casts:
                break
            await asyncio.sleep(0.1)
        assert casts and len(casts) == 1, casts
        c = casts[0]
        assert c["sessionId"] == sid and c["pid"] == daemon.proc.pid
        assert c["sharing"] == f"screen {display} (XShm)" and c["audio"] is False
        assert not (registry / f"{stale}.json").exists()
        rc, out, err = await run_castd(env, "status")
        assert rc == 0 and out.startswith(f"Session {sid}: casting, sharing screen {display} (XShm), since "), out

        rc, out, err = await run_castd(env, "stop", timeout=15)
        assert rc == 0, out + err
        assert out.strip() == f"Stopped the cast of session {sid}; the receiver was told it ended."
        # stop returns once castd has exited: the process is gone already.
        assert not pathlib.Path(f"/proc/{daemon.proc.pid}/cmdline").exists() or \
            pathlib.Path(f"/proc/{daemon.proc.pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
        await ends_cleanly(answerer, daemon)
        assert not (registry / f"{sid}.json").exists()
        rc, out, err = await run_castd(env, "status")
        assert (rc, out.strip()) == (0, "No cast is running.")
        rc, out, err = await run_castd(env, "stop")
        assert rc == 1 and "No cast is running" in err
        last = desk.calls("Notify")[-1]
        assert last["summary"] == "Casting stopped"
        assert last["body"] == f"Cast stopped. Your screen is no longer sent to the receiver of session {sid[:8]}."


async def test_with_desktop_audio_the_notification_and_status_say_the_audio_is_shared_too(stack, tmp_path):
    """The same with PipeWire and a playing sink (castkit.audio_rig): the receiver takes audio."""
    from castkit.audio_rig import PipeWireAudioRig, installed, write_tone
    if not installed():
        import pytest
        pytest.skip("pipewire, wireplumber and pw-play are needed")

    class AudioDesktop(Notifications, PipeWireAudioRig):
        pass
    rig = await AudioDesktop().start()
    await rig.start_notifications()
    wav = tmp_path / "tone.wav"
    write_tone(wav, 1000, 0.5, seconds=60)
    rig.play(wav)
    screen = await XScreen(640, 360).start()
    try:
        env = castd_env(stack, tmp_path, DISPLAY=screen.display, **rig.env())
        async with answered_cast(stack, tmp_path, env) as (answerer, daemon):
            sid = answerer.signals.session_id
            await daemon.wait_event("audio_started", timeout=30)
            shown = await until(lambda: [c for c in rig.calls("Notify") if c["summary"] == "Sharing your screen and audio"],
                                "the screen-and-audio notice")
            assert shown[0]["body"] == (f"Your screen and desktop audio are being sent to the receiver of session "
                                        f"{sid[:8]} (screen {screen.display} (XShm)).")
            assert shown[0]["actions"] == ["stop", "Stop casting"]
            rc, out, err = await run_castd(env, "status", "--json")
            assert json.loads(out)["casts"][0]["audio"] is True, out
            rc, out, err = await run_castd(env, "status")
            assert f"sharing screen {screen.display} (XShm) and desktop audio, since" in out, out
            daemon.signal()
            await ends_cleanly(answerer, daemon)
            last = rig.calls("Notify")[-1]
            assert last["summary"] == "Casting stopped" and last["replaces_id"] == shown[0]["id"]
    finally:
        screen.stop()
        rig.stop()


async def test_stop_without_an_id_asks_which_when_several_casts_run(stack, tmp_path):
    """Two approved sessions, castd on each, no receiver answering yet: status lists both as
    connecting; stop without an id lists them and exits 2; stop <id> ends that one cleanly; then
    stop without an id ends the one left."""
    from castkit.castd_proc import Daemon, pair
    desk = await DesktopSession().start(notifications=False)
    screen = await XScreen(320, 240).start()
    receivers, daemons = [], []
    try:
        env = castd_env(stack, tmp_path, DISPLAY=screen.display, **desk.env())
        for _ in range(2):
            rx, rc, _, raw = await pair(stack, tmp_path)
            receivers.append(rx)
            assert rc == 0, raw
            daemons.append(await Daemon.start(env, rx.session["sessionId"]))
        sids = [rx.session["sessionId"] for rx in receivers]
        for d in daemons:
            await d.wait_log("event=ready", timeout=30)

        async def states():
            rc, out, _ = await run_castd(env, "status", "--json")
            return {c["sessionId"]: c["state"] for c in json.loads(out)["casts"]}
        for _ in range(100):
            if await states() == {sids[0]: "negotiating", sids[1]: "negotiating"}:
                break
            await asyncio.sleep(0.1)
        assert await states() == {sids[0]: "negotiating", sids[1]: "negotiating"}
        rc, out, err = await run_castd(env, "status")
        assert len(out.splitlines()) == 2
        assert all(": connecting to the receiver, sharing screen" in l for l in out.splitlines()), out

        rc, out, err = await run_castd(env, "stop")
        assert rc == 2, out + err
        assert err.startswith("castd: 2 casts are running: ") and all(s in err for s in sids)
        assert err.rstrip().endswith("Say which: castd stop <session id>.")
        assert all(d.proc.returncode is None for d in daemons)   # nothing was stopped

        for i, args in ((1, (sids[1],)), (0, ())):   # by id, then the only one left
            rc, out, err = await run_castd(env, "stop", *args, timeout=15)
            assert (rc, out.strip()) == (0, f"Stopped the cast of session {sids[i]}; the receiver was told it ended."), err
            code, _ = await daemons[i].wait(timeout=5)
            assert code == 0
            rows = await receivers[i].client.select(sids[i], "receiver")
            assert [r["payload"] for r in rows if r["message_type"] == "disconnect"] == [{"reason": "sender_ended"}]
            assert await receivers[i].client.session_status(sids[i]) == "disconnected"   # castd's `end`
            if i == 1:   # the other cast goes on
                assert daemons[0].proc.returncode is None and await states() == {sids[0]: "negotiating"}
        assert await states() == {}
    finally:
        for d in daemons:
            await d.kill()
        for rx in receivers:
            await rx.client.close()
        screen.stop()
        desk.stop()
