"""The config file and `castd config` with the real binary (issue 30): each value's source
(flag, environment, file:line, default, pairing link), errors that name the line, and pairing
against the local stack with the backend taken from the file alone (no CASTD_* variables), by
PIN and by QR link (whose origin becomes the session's API URL)."""
import asyncio
import json
import os
import stat
import subprocess

from castkit.castd_proc import Receiver, castd_binary, run_castd


def clean_env(tmp_path, **extra) -> dict:
    """The environment without any CASTD_* variable, with private XDG directories."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CASTD_")}
    env.pop("JOURNAL_STREAM", None)
    env.update({"XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_STATE_HOME": str(tmp_path / "state"),
                "HOME": str(tmp_path)})
    env.update(extra)
    return env


def write_config(tmp_path, text: str):
    d = tmp_path / "config" / "castd"
    d.mkdir(parents=True, exist_ok=True)
    (d / "config").write_text(text)
    return d / "config"


def castd_config(env, *args):
    r = subprocess.run([castd_binary(), "config", *args], capture_output=True, text=True, env=env, timeout=30)
    return r


def test_config_json_names_each_values_source(tmp_path):
    key = "sb_publishable_h-cli-0123456789"
    path = write_config(tmp_path, f"# test\nsupabase-key = {key}\ncapture = portal\nmax-fps = 20   # a comment\n")
    r = castd_config(clean_env(tmp_path, CASTD_MAX_FPS="12", CASTD_AUDIO="off", CASTD_ENCODER=""),
                     "--json", "--capture", "x11")
    assert r.returncode == 0, r.stderr
    c = json.loads(r.stdout)
    assert c["file"] == str(path) and c["fileExists"] is True
    k = c["keys"]
    assert (k["capture"]["value"], k["capture"]["source"], k["capture"]["from"]) == ("x11", "flag", "flag --capture")
    assert (k["max-fps"]["value"], k["max-fps"]["from"]) == ("12", "environment CASTD_MAX_FPS")
    assert (k["audio"]["value"], k["audio"]["source"]) == ("off", "environment")
    assert (k["encoder"]["value"], k["encoder"]["source"]) == ("auto", "default")   # empty variable = unset
    assert (k["supabase-key"]["source"], k["supabase-key"]["from"]) == ("file", f"{path}:2")
    assert k["supabase-key"]["value"] == key[:8] + "…" and key not in r.stdout   # shortened
    assert (k["api-url"]["value"], k["api-url"]["source"]) == ("https://sideview.svry.co", "default")
    assert k["supabase-url"]["value"] == "https://sxhxcjoqxrauycxizing.supabase.co"
    assert k["max-height"]["value"] == "1080" and k["output"]["value"] is None
    assert (k["h264-profile"]["value"], k["h264-profile"]["source"]) == ("auto", "default")
    assert (k["dmabuf"]["value"], k["dmabuf"]["source"]) == ("true", "default")
    assert len(k) == 17


def test_a_bad_line_stops_every_command_with_the_line_and_the_fix(tmp_path):
    write_config(tmp_path, "capture = x11\n\ncaptur = portal\n")
    env = clean_env(tmp_path)
    for args in (["config"], ["doctor"], ["pair", "--pin", "482913"]):
        r = subprocess.run([castd_binary(), *args], capture_output=True, text=True, env=env, timeout=30)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert "line 3: unknown key `captur` (did you mean `capture`?); known keys: api-url," in r.stderr, r.stderr
    write_config(tmp_path, "max-fps = 60\n")
    r = castd_config(env)
    assert r.returncode == 2 and "line 1: max-fps takes a whole number from 1 to 30 (got `60`)" in r.stderr
    write_config(tmp_path, "max-fps = 15\n")
    r = castd_config(clean_env(tmp_path, CASTD_CAPTURE="wayland"))
    assert r.returncode == 2 and "CASTD_CAPTURE: capture takes auto, x11, portal or mutter (got `wayland`)" in r.stderr


def test_a_missing_publishable_key_says_where_to_set_it(tmp_path):
    r = subprocess.run([castd_binary(), "pair", "--pin", "482913"], capture_output=True, text=True,
                       env=clean_env(tmp_path), timeout=30)
    assert r.returncode == 2
    path = tmp_path / "config" / "castd" / "config"
    assert r.stderr.strip() == (f"castd: The Supabase publishable key is not set: add `supabase-key = …` to {path}, "
                                "set CASTD_SUPABASE_KEY, or pass --supabase-key.")


async def test_pair_by_pin_uses_the_backend_from_the_config_file(stack, tmp_path):
    write_config(tmp_path, f"api-url = {stack.api_url}\nsupabase-url = {stack.supabase_url}\nsupabase-key = {stack.key}\n")
    rx = Receiver(stack)
    s = await rx.create()
    task = asyncio.create_task(run_castd(clean_env(tmp_path), "pair", "--pin", s["pin"], "--json"))
    await rx.wait_pairing_then(True)
    rc, out, err = await task
    await rx.client.close()
    assert rc == 0, out + err
    assert [json.loads(l)["event"] for l in out.splitlines()] == ["paired", "approved"]
    # castd config agrees on where each backend value came from.
    c = json.loads(castd_config(clean_env(tmp_path), "--json").stdout)["keys"]
    assert [c[k]["source"] for k in ("api-url", "supabase-url", "supabase-key")] == ["file"] * 3
    assert c["api-url"]["value"] == stack.api_url


async def test_a_qr_link_brings_its_origin_for_pairing_and_for_the_session(stack, tmp_path):
    # No api-url anywhere: only the link says where the API is.
    write_config(tmp_path, f"supabase-url = {stack.supabase_url}\nsupabase-key = {stack.key}\n")
    rx = Receiver(stack)
    s = await rx.create()
    task = asyncio.create_task(run_castd(clean_env(tmp_path), "pair", s["qrUrl"], "--json"))
    await rx.wait_pairing_then(True)
    rc, out, err = await task
    await rx.client.close()
    assert rc == 0, out + err
    sid = s["sessionId"]
    record = tmp_path / "state" / "castd" / "pairing" / sid
    assert record.read_text().strip() == stack.api_url
    assert stat.S_IMODE(record.stat().st_mode) == 0o600 and stat.S_IMODE(record.parent.stat().st_mode) == 0o700
    token = s["qrUrl"].split("t=")[1].split("&")[0]
    assert token not in record.read_text() and token not in out + err
    # The daemon of that session resolves the API URL from the record (castd config --session shows it).
    c = json.loads(castd_config(clean_env(tmp_path), "--json", "--session", sid).stdout)["keys"]["api-url"]
    assert (c["value"], c["source"], c["from"]) == (stack.api_url, "pairing-link", f"pairing link ({record})")
    # An explicit setting still wins over the link.
    c = json.loads(castd_config(clean_env(tmp_path, CASTD_API_URL="http://127.0.0.1:9"), "--json", "--session", sid).stdout)
    assert c["keys"]["api-url"]["source"] == "environment"
    # Another session has no record: the default.
    other = json.loads(castd_config(clean_env(tmp_path), "--json", "--session", "00000000-0000-4000-8000-000000000000").stdout)
    assert other["keys"]["api-url"]["source"] == "default"


async def test_the_daemon_casts_under_the_caps_and_options_of_the_file(stack, tmp_path):
    """A real cast (Xvfb 1280×720 → aiortc): the file lowers the caps and turns audio off, an
    environment variable overrides the file's max-fps; the receiver asked for 1080p30."""
    from castkit.castd_proc import answered_cast, castd_env
    from castkit.castd_stats import stats_lines
    from castkit.xscreen import XScreen

    write_config(tmp_path, "capture = x11\naudio = off\nmax-height = 360\nmax-fps = 20\nmax-bitrate-kbps = 400\n")
    screen = await XScreen(1280, 720).start()
    try:
        env = castd_env(stack, tmp_path, DISPLAY=screen.display, XDG_CONFIG_HOME=str(tmp_path / "config"),
                        CASTD_MAX_FPS="8")
        prefs = {"autoQuality": True, "resolution": "1080p", "frameRate": 30}
        async with answered_cast(stack, tmp_path, env, prefs=prefs) as (answerer, daemon):
            await answerer.wait_frames(10, timeout=60)
            assert answerer.last_frame.shape == (360, 640, 3)     # 1280×720 under a 640×360 box
            await daemon.wait_log("event=stats", timeout=20)
            daemon.signal()
            rc, _ = await daemon.wait(timeout=10)
            assert rc == 0
    finally:
        screen.stop()
    log = "\n".join(daemon.stderr_lines)
    assert "backend=xshm" in log and "event=audio_off" in log
    stats = [s for _, s in stats_lines(daemon)]
    assert stats and all(0 < s["fps_target"] <= 8 for s in stats if s["fps_target"]), stats
    assert all(s["encoder_kbps"] <= 400 for s in stats), stats
