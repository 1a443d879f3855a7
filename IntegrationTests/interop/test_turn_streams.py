"""TURN over TCP and TLS (RFC 8656 §3.1) against a real coturn, and `castd doctor --turn`.

turn_world.py's two symmetric NATs with no direct path; coturn also listens on TLS 5349 with
a certificate from a test CA made by the test, which castd trusts only through
`--dev-trust-certificate`. The quick CI rows: a cast whose only relay is `turns:` (TLS runs
over TCP, so the TCP framing is exercised too), and the doctor against good, wrong and
absent servers. The longer rows (the daemon over TCP and TLS, the TCP connection cut
mid-cast) are in Scripts/faults_turn.py.
"""
import asyncio
import json
import subprocess

import pytest

from castkit.devsender import BARS, DevSender, assert_sent_cleanly, bar_colours, castd_binary
from castkit.turn_world import TURN_IP, TURN_PORT, TURNS_PORT, TurnWorld, answer_from

pytestmark = pytest.mark.skipif(TurnWorld.available() is not None, reason=TurnWorld.available() or "")

TURNS_URL = f"turns:{TURN_IP}:{TURNS_PORT}"
TCP_URL = f"turn:{TURN_IP}:{TURN_PORT}?transport=tcp"
UDP_URL = f"turn:{TURN_IP}:{TURN_PORT}"


@pytest.mark.timeout(60)
async def test_a_cast_flows_through_coturn_over_tls_across_two_symmetric_nats(bars_clip):
    with TurnWorld(tls=True) as world:
        user, credential = world.credentials()
        proc = await asyncio.create_subprocess_exec(
            *world.exec("c", castd_binary(), "dev-send", "--h264", str(bars_clip), "--no-loopback", "--fps", "30",
                        "--seconds", "20", "--turn", TURNS_URL, "--turn-user", user, "--turn-credential", credential,
                        "--dev-trust-certificate", str(world.ca_path)),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        sender = DevSender(proc)
        pc = None
        try:
            pc, frames = await answer_from(world, sender, frames_wanted=30)
            for got, want in zip(bar_colours(frames[-1]), BARS):
                assert max(abs(g - w) for g, w in zip(got, want)) <= 12, (got, want)
        finally:
            if pc:
                await pc.close()
            rc = await sender.stop()
        assert_sent_cleanly(sender, rc, frames=30)
        allocated = [m for m in sender.log if m["type"] == "relayAllocated"]
        assert [m["server"] for m in allocated] == [TURNS_URL], sender.log
        pairs = [m for m in sender.log if m["type"] == "selectedPair"]
        assert pairs and pairs[-1]["localType"] == "relay" and pairs[-1]["relayTransport"] == "tls", pairs
        log = world.coturn_log()
        # coturn's account: the allocation and the channel were made over its TLS listener.
        assert "ALLOCATE processed, success" in log, log[-3000:]
        assert "CHANNEL_BIND processed, success" in log, log[-3000:]
        assert f":{TURNS_PORT}" in log and "TLS" in log, log[-3000:]


def doctor(world: TurnWorld, url: str, user: str, credential: str, *extra: str) -> tuple[int, dict, str]:
    r = subprocess.run(world.exec("c", castd_binary(), "doctor", "--turn", "--json", "--turn-url", url,
                                  "--turn-user", user, *extra),
                       env={"CASTD_TURN_CREDENTIAL": credential, "PATH": "/usr/bin:/bin"},
                       capture_output=True, text=True, timeout=30)
    assert credential not in r.stdout + r.stderr
    return r.returncode, (json.loads(r.stdout) if r.stdout.strip() else {}), r.stderr


@pytest.mark.timeout(60)
def test_doctor_turn_allocates_on_each_transport_and_names_what_fails():
    with TurnWorld(tls=True) as world:
        user, credential = world.credentials()
        # Good: UDP, TCP and TLS (the test CA through the development flag) each give a relayed address.
        for url in (UDP_URL, TCP_URL, TURNS_URL):
            rc, out, err = doctor(world, url, user, credential, "--dev-trust-certificate", str(world.ca_path))
            assert rc == 0, (url, out, err)
            [line] = out["turn"]
            assert line["ok"] and line["server"] == url, line
            assert line["relayed"].startswith(f"{TURN_IP}:"), line
            # coturn saw castd's NAT mapping, not its private address.
            assert line["mapped"].startswith("203.0.113.2:"), line
        # TLS without the test CA: the certificate is refused, and the sentence says so at once.
        # (A handshake that failed before the probe had added its connection used to be lost,
        # and the doctor waited out its 10 s for an Allocate answer: TURNRelays.earlyCloses.)
        rc, out, _ = doctor(world, TURNS_URL, user, credential)
        assert rc == 1
        [line] = out["turn"]
        assert line["code"] == "turn-connection" and "TLS handshake" in line["error"] and "certificate" in line["error"], line
        # The wrong secret: 401 after the authenticated retry, a sentence naming the server.
        bad_user, bad_credential = world.credentials(secret="not-the-secret")
        rc, out, _ = doctor(world, TCP_URL, bad_user, bad_credential)
        assert rc == 1
        [line] = out["turn"]
        assert line["code"] == "turn-unauthorized" and TCP_URL in line["error"] and "credentials" in line["error"], line
        assert bad_user not in line["error"]
        # A server that is down: its connection is refused, and the sentence names the server and
        # says so (this too was sometimes lost to the same race and reported as an unanswered
        # Allocate after 10 s).
        world.stop_coturn()
        rc, out, _ = doctor(world, TCP_URL, user, credential)
        assert rc == 1
        [line] = out["turn"]
        assert line["code"] == "turn-connection" and TCP_URL in line["error"] and "refused" in line["error"], line
