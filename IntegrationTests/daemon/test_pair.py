"""castd pair against the local stack: PIN and QR URL, approve and deny, bad codes, the rate limit,
one stable identity, and no secret in any output."""
import json
import os
import stat

import pytest

from castkit.castd_proc import pair, run_castd, castd_env, Receiver


async def test_pin_pairing_approved_prints_session_and_prefs(stack, tmp_path):
    rx, rc, events, raw = await pair(stack, tmp_path, prefs={"autoQuality": True, "resolution": "720p", "frameRate": 60})
    await rx.client.close()
    assert rc == 0, raw
    assert [e["event"] for e in events] == ["paired", "approved"]
    assert events[0]["sessionId"] == rx.session["sessionId"]
    assert events[1]["resolution"] == "720p" and events[1]["frameRate"] == "60"
    assert rx.session["pin"] not in raw                   # the PIN is never echoed
    cred = tmp_path / "castd" / "credentials.json"
    assert stat.S_IMODE(cred.stat().st_mode) == 0o600
    assert stat.S_IMODE(cred.parent.stat().st_mode) == 0o700
    token = json.loads(cred.read_text())["refresh_token"]
    assert token not in raw


async def test_identity_is_created_once_and_reused(stack, tmp_path):
    rx1, rc1, _, _ = await pair(stack, tmp_path)
    await rx1.client.close()
    first = json.loads((tmp_path / "castd" / "credentials.json").read_text())["user_id"]
    rx2, rc2, _, _ = await pair(stack, tmp_path)
    await rx2.client.close()
    second = json.loads((tmp_path / "castd" / "credentials.json").read_text())["user_id"]
    assert rc1 == rc2 == 0
    assert first == second


async def test_deny_is_reported_as_denied(stack, tmp_path):
    rx, rc, events, raw = await pair(stack, tmp_path, approve=False)
    await rx.client.close()
    assert rc == 1, raw
    assert events[-1]["event"] == "failed" and events[-1]["code"] == "denied"


async def test_qr_url_pairing(stack, tmp_path):
    rx = Receiver(stack)
    s = await rx.create()
    import asyncio
    task = asyncio.create_task(run_castd(castd_env(stack, tmp_path), "pair", s["qrUrl"], "--json"))
    await rx.wait_pairing_then(True)
    rc, out, err = await task
    assert rc == 0, out + err
    token = s["qrUrl"].split("t=")[1].split("&")[0]
    assert token not in out + err
    await rx.client.close()


# castd cannot spoof X-Forwarded-For, so tests that spend the per-IP pairing
# budget (5 failures per 10 minutes) get a stack of their own.

async def test_wrong_pin_is_a_clear_error(stack_factory, tmp_path):
    stack = stack_factory(pair_failure_window=601)
    rx = Receiver(stack)
    s = await rx.create()
    wrong = "%06d" % ((int(s["pin"]) + 1) % 1000000)
    rc, out, err = await run_castd(castd_env(stack, tmp_path), "pair", "--pin", wrong)
    assert rc == 1
    assert "not valid or has expired" in err
    assert wrong not in out + err
    await rx.client.close()


async def test_sixth_failure_is_rate_limited_with_the_wait_shown(stack_factory, tmp_path):
    stack = stack_factory(pair_failure_window=602)
    env = castd_env(stack, tmp_path)
    codes = []
    for _ in range(6):
        rc, out, err = await run_castd(env, "pair", "--pin", "000001", "--json")
        codes.append(json.loads(out.splitlines()[-1])["code"])
    assert codes[:5] == ["invalid_code"] * 5
    assert codes[5] == "rate_limited"
    rc, out, err = await run_castd(env, "pair", "--pin", "000001")
    assert "Too many pairing attempts. Try again in" in err


async def test_missing_configuration_names_the_variable(tmp_path):
    """The backend URLs default to production (issue 30); the publishable key has no default,
    and its absence names the three places to set it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CASTD_")}
    env["XDG_STATE_HOME"] = str(tmp_path)
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    rc, out, err = await run_castd(env, "pair", "--pin", "123456")
    assert rc == 2
    assert f"add `supabase-key = …` to {tmp_path}/config/castd/config, set CASTD_SUPABASE_KEY, or pass --supabase-key" in err
