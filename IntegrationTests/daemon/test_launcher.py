"""castd's desktop launcher (Scripts/castd-launcher) against the local stack, a private desktop
(bus, runtime dir, notification service) and a recording `zenity` on PATH that answers the PIN
dialog and records every progress line and message: the PIN never reaches a command line, the
person sees progress and the outcome in words, and the cast it starts is the real castd."""
import asyncio
import json
import os
import pathlib

from castkit.castd_build import ROOT, binary
from castkit.castd_proc import Receiver, castd_env, run_castd
from castkit.desktop_session import DesktopSession
from castkit.xscreen import XScreen

LAUNCHER = ROOT / "Scripts" / "castd-launcher"

# The zenity stand-in: --entry prints the PIN from a 0600 file (not from its arguments); --progress
# records each line it reads; anything else (--info, --error) records its arguments.
ZENITY = """#!/bin/bash
log="$ZENITY_STANDIN_DIR/calls"
case " $* " in
  *" --entry "*) printf 'entry\\n' >>"$log"; cat "$ZENITY_STANDIN_DIR/pin" ;;
  *" --progress "*) while IFS= read -r line; do printf 'progress %s\\n' "$line" >>"$log"; done ;;
  *) printf '%s\\n' "$*" >>"$log" ;;
esac
"""


def desktop_bin(tmp_path: pathlib.Path) -> pathlib.Path:
    """A PATH directory with castd (the build under test) and the zenity stand-in."""
    d = tmp_path / "bin"
    d.mkdir()
    (d / "castd").symlink_to(binary("castd"))
    (d / "zenity").write_text(ZENITY)
    (d / "zenity").chmod(0o755)
    return d


def command_lines() -> list[list[bytes]]:
    """The arguments of every process (all of /proc, not only ours)."""
    out = []
    for p in pathlib.Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                out.append((p / "cmdline").read_bytes().split(b"\0"))
            except OSError:
                continue
    return out


async def launch(env: dict, pin: str, approve, timeout: float = 40):
    """Runs the launcher while `approve()` plays the receiver, scanning every command line on the
    machine meanwhile. Returns (exit code, stderr, every command line that held the PIN)."""
    p = await asyncio.create_subprocess_exec(str(LAUNCHER), env=env, stdout=asyncio.subprocess.PIPE,
                                             stderr=asyncio.subprocess.PIPE)
    seen: list[str] = []
    pairing_seen = False   # the scan caught `castd pair` itself while it waited for the receiver

    async def scan():
        nonlocal pairing_seen
        while p.returncode is None:
            for args in command_lines():
                if any(pin.encode() in a for a in args):
                    seen.append(b" ".join(args).decode(errors="replace"))
                if len(args) > 2 and args[0].endswith(b"castd") and args[1] == b"pair":
                    pairing_seen = True
            await asyncio.sleep(0.01)
    scanner = asyncio.create_task(scan())
    try:
        await approve()
        out, err = await asyncio.wait_for(p.communicate(), timeout)
    finally:
        if p.returncode is None:
            p.kill()
            await p.wait()
        await scanner
    assert pairing_seen   # so the scan did look while the PIN was in use
    return p.returncode, err.decode(), seen


async def test_the_launcher_pairs_by_a_pin_on_a_pipe_shows_progress_and_starts_the_cast(stack, tmp_path):
    from castkit.receiver_answerer import ReceiverAnswerer
    desk = await DesktopSession().start()
    screen = await XScreen(640, 360).start()
    rx = Receiver(stack)
    answerer = None
    env = {}
    try:
        s = await rx.create()
        sid = s["sessionId"]
        zdir = tmp_path / "zenity"
        zdir.mkdir(mode=0o700)
        (zdir / "pin").write_text(s["pin"] + "\n")
        (zdir / "pin").chmod(0o600)
        env = castd_env(stack, tmp_path, DISPLAY=screen.display, **desk.env(), ZENITY_STANDIN_DIR=str(zdir),
                        PATH=f"{desktop_bin(tmp_path)}:{os.environ['PATH']}", XDG_CONFIG_HOME=str(tmp_path / "config"))
        env.pop("WAYLAND_DISPLAY", None)

        async def approve():
            nonlocal answerer
            await rx.wait_pairing_then(True, timeout=30)
            answerer = ReceiverAnswerer(rx.client, sid)
            await answerer.start()
        rc, err, seen = await launch(env, s["pin"], approve)
        calls = (zdir / "calls").read_text().splitlines()
        assert seen == [], seen
        assert rc == 0, (err, calls)
        assert calls[0] == "entry"
        assert "progress # Paired. Waiting for the receiver to approve…" in calls
        assert calls[-1].startswith(f"--info --title=castd --no-wrap --text=Casting to the receiver (session {sid[:8]})."), calls

        # No user manager on this private desktop: castd --session runs in the background; status sees it.
        async def casting():
            while True:
                rc, out, _ = await run_castd(env, "status", "--json")
                casts = json.loads(out)["casts"] if rc == 0 else []
                if casts and casts[0]["state"] == "casting":
                    return casts[0]
                await asyncio.sleep(0.1)
        cast = await asyncio.wait_for(casting(), 40)
        assert cast["sessionId"] == sid
        await answerer.wait_frames(5, timeout=30)
        notices = [c for c in desk.calls("Notify") if c["actions"] == ["stop", "Stop casting"]]
        assert notices and notices[0]["body"].startswith(f"Your screen is being sent to the receiver of session {sid[:8]}")

        rc, out, err = await run_castd(env, "stop", sid, timeout=15)
        assert rc == 0, out + err
        row = await answerer.signals.wait_row(lambda r: r["message_type"] == "disconnect", timeout=5)
        assert row["payload"] == {"reason": "sender_ended"}
        await answerer.signals.wait_status("disconnected", timeout=5)
        assert "Cast stopped." in (tmp_path / "castd" / "cast.log").read_text()
    finally:
        if env:   # a cast the launcher started and the test did not stop
            rc, out, _ = await run_castd(env, "status", "--json")
            for c in (json.loads(out)["casts"] if rc == 0 else []):
                os.kill(c["pid"], 9)
        if answerer:
            await answerer.close()
        await rx.client.close()
        screen.stop()
        desk.stop()


async def test_a_denied_request_is_said_in_words(stack, tmp_path):
    desk = await DesktopSession().start(notifications=False)
    rx = Receiver(stack)
    try:
        s = await rx.create()
        zdir = tmp_path / "zenity"
        zdir.mkdir(mode=0o700)
        (zdir / "pin").write_text(s["pin"] + "\n")
        env = castd_env(stack, tmp_path, DISPLAY=":0", **desk.env(), ZENITY_STANDIN_DIR=str(zdir),
                        PATH=f"{desktop_bin(tmp_path)}:{os.environ['PATH']}", XDG_CONFIG_HOME=str(tmp_path / "config"))
        rc, err, seen = await launch(env, s["pin"], lambda: rx.wait_pairing_then(False, timeout=30))
        calls = (zdir / "calls").read_text().splitlines()
        assert rc == 1 and seen == []
        assert calls[-1] == "--error --title=castd --no-wrap --text=The receiver denied the request.", calls
    finally:
        await rx.client.close()
        desk.stop()


async def test_without_a_dialog_tool_the_launcher_says_so_in_a_notification_and_fails(stack, tmp_path):
    """No display, so no dialog can be shown: no terminal prompt either (Terminal=false), but a
    notification on the session bus saying what is missing, and exit 69."""
    desk = await DesktopSession().start()
    try:
        env = castd_env(stack, tmp_path, **desk.env(), XDG_CONFIG_HOME=str(tmp_path / "config"))
        env.pop("DISPLAY", None)
        env.pop("WAYLAND_DISPLAY", None)
        p = await asyncio.create_subprocess_exec(str(LAUNCHER), env=env, stdin=asyncio.subprocess.DEVNULL,
                                                 stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(p.communicate(), 20)
        assert p.returncode == 69
        assert "needs zenity or kdialog" in err.decode()
        notes = desk.calls("Notify")
        assert len(notes) == 1 and "needs zenity or kdialog" in notes[0]["body"], notes
    finally:
        desk.stop()


async def test_an_empty_pin_is_said_without_pairing(stack, tmp_path):
    zdir = tmp_path / "zenity"
    zdir.mkdir(mode=0o700)
    (zdir / "pin").write_text("  \n")
    env = castd_env(stack, tmp_path, DISPLAY=":0", ZENITY_STANDIN_DIR=str(zdir),
                    PATH=f"{desktop_bin(tmp_path)}:{os.environ['PATH']}", XDG_CONFIG_HOME=str(tmp_path / "config"))
    p = await asyncio.create_subprocess_exec(str(LAUNCHER), env=env, stdout=asyncio.subprocess.PIPE,
                                             stderr=asyncio.subprocess.PIPE)
    await asyncio.wait_for(p.communicate(), 20)
    calls = (zdir / "calls").read_text().splitlines()
    assert p.returncode == 1
    assert calls == ["entry", "--error --title=castd --no-wrap --text=No PIN was entered. Open castd again and type "
                              "the 6 digits the receiver shows."]
    assert not (tmp_path / "castd" / "credentials.json").exists()   # castd pair never ran


KDIALOG = """#!/bin/bash
log="$KDIALOG_STANDIN_DIR/calls"
case " $* " in
  *" --inputbox "*) printf 'inputbox\\n' >>"$log"; cat "$KDIALOG_STANDIN_DIR/pin" ;;
  *) printf '%s\\n' "$*" >>"$log" ;;
esac
"""


async def test_with_kdialog_instead_of_zenity(stack, tmp_path):
    """A KDE desktop: no zenity on PATH (a PATH of only the tools the launcher uses), a recording
    kdialog; the receiver denies: the popup said it waited for Approve, the error says why."""
    import shutil
    d = tmp_path / "kbin"
    d.mkdir()
    for tool in ("bash", "sed", "mktemp", "chmod", "mkfifo", "cat", "head", "rm", "dirname", "readlink",
                 "mkdir", "setsid", "systemctl"):
        (d / tool).symlink_to(shutil.which(tool))
    (d / "castd").symlink_to(binary("castd"))
    (d / "kdialog").write_text(KDIALOG)
    (d / "kdialog").chmod(0o755)
    kdir = tmp_path / "kdialog"
    kdir.mkdir(mode=0o700)
    rx = Receiver(stack)
    try:
        s = await rx.create()
        (kdir / "pin").write_text(s["pin"] + "\n")
        env = castd_env(stack, tmp_path, DISPLAY=":0", KDIALOG_STANDIN_DIR=str(kdir), PATH=str(d),
                        XDG_CONFIG_HOME=str(tmp_path / "config"))
        rc, err, seen = await launch(env, s["pin"], lambda: rx.wait_pairing_then(False, timeout=30))
        calls = (kdir / "calls").read_text().splitlines()
        assert rc == 1 and seen == [], (err, calls)
        assert calls[0] == "inputbox"
        assert "--title castd --passivepopup Paired. Waiting for the receiver to approve… 10" in calls
        assert calls[-1] == "--title castd --error The receiver denied the request.", calls
    finally:
        await rx.client.close()
