"""`castd doctor --turn` as the paired sender: the TURN servers come from the local stack's
ice-config (`Scripts/devstack up --turn URLS --turn-secret SECRET`: time-limited TURN REST
credentials, the scheme of coturn's `use-auth-secret`), tested against a real coturn from
behind castd's symmetric NAT (turn_world.py), UDP, TCP and TLS (the test CA through the
development trust flag). Then the same stack's credentials refused (coturn restarted with
another secret) and already expired (a stack handing out credentials that ended a minute
ago): a sentence naming each server, exit status 1, no credential printed.

The first test is the quick CI row (one stack, ~20 s with the release build, 48 s at load 23);
the expired one needs a second stack and runs with the long TURN rows (CASTD_TURN_LONG=1).
"""
import os
import re
import time

import pytest

from castkit.turn_cast import Stack, TurnCast
from castkit.turn_world import TURN_IP, TURN_PORT, TURNS_PORT, TurnWorld
from gateway.ice import turn_credentials

pytestmark = pytest.mark.skipif(TurnWorld.available() is not None, reason=TurnWorld.available() or "")

URLS = [f"turn:{TURN_IP}:{TURN_PORT}", f"turn:{TURN_IP}:{TURN_PORT}?transport=tcp", f"turns:{TURN_IP}:{TURNS_PORT}"]


def rest_user(coturn_log: str) -> str:
    """The TURN REST username ("<expiry>:<uid>") coturn saw in the authenticated Allocates."""
    users = set(re.findall(r"username <(\d+:[0-9a-f-]+)>", coturn_log)) | set(re.findall(r"user <(\d+:[0-9a-f-]+)>", coturn_log))
    assert len(users) == 1, (users, coturn_log[-3000:])
    return users.pop()


@pytest.mark.timeout(150)
async def test_doctor_turn_allocates_on_every_server_of_the_stacks_ice_config(tmp_path):
    with TurnWorld(tls=True) as world:
        stack = Stack(world, tmp_path, turn_urls=URLS).up()
        cast = TurnCast(world, stack, "", tmp_path / "cast")
        secret = world.secret
        try:
            await cast.pair()
            rc, out, err = await cast.doctor_turn()
            log = world.coturn_log()
            # The same stack, coturn restarted with another shared secret: ice-config's credentials are refused.
            world.stop_coturn()
            world.secret = "not-" + secret
            world.start_coturn()
            rc_bad, out_bad, err_bad = await cast.doctor_turn()
        finally:
            await cast.stop()
            stack.down()
        assert rc == 0, (out, err)
        assert out["source"] == "the backend's ice-config" and out["working"] == 3, out
        assert [l["server"] for l in out["turn"]] == URLS, out
        for line in out["turn"]:
            assert line["ok"] and line["relayed"].startswith(f"{TURN_IP}:"), line
            assert line["mapped"].startswith("203.0.113.2:"), line     # castd's NAT mapping
        # The credentials are the stack's time-limited ones (a day, devstack's default), and
        # neither they nor the secret are printed.
        user = rest_user(log)
        expiry = int(user.split(":")[0])
        assert 86_400 - 300 <= expiry - time.time() <= 86_400, user
        _, credential = turn_credentials(secret, user.split(":", 1)[1], expiry)
        for text in (str(out), err, str(out_bad), err_bad):
            assert credential not in text and secret not in text and user not in text

        assert rc_bad == 1 and out_bad["working"] == 0, out_bad
        for url, line in zip(URLS, out_bad["turn"]):
            assert line["code"] == "turn-unauthorized" and url in line["error"] and "credentials" in line["error"], line


@pytest.mark.skipif(os.environ.get("CASTD_TURN_LONG") != "1", reason="a second stack: CASTD_TURN_LONG=1")
@pytest.mark.timeout(150)
async def test_doctor_turn_names_each_server_when_ice_configs_credentials_have_expired(tmp_path):
    with TurnWorld() as world:
        # The stack hands out credentials whose expiry passed a minute ago: coturn refuses them.
        stack = Stack(world, tmp_path, turn_urls=URLS[:2], credential_ttl=-60).up()
        cast = TurnCast(world, stack, "", tmp_path / "cast")
        try:
            await cast.pair()
            rc, out, err = await cast.doctor_turn()
        finally:
            await cast.stop()
            stack.down()
        assert rc == 1 and out["working"] == 0, (out, err)
        for url, line in zip(URLS, out["turn"]):
            assert line["code"] == "turn-unauthorized" and url in line["error"], line
