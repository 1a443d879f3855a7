"""Spec §11 against real peers: the media path is cut for good (nftables in a network
namespace this test creates), castd re-offers three times with fresh negotiationIds after
1 s, 3 s and 7 s, then gives up: `disconnect {"reason":"failed"}`, `end`, exit 1 with a sentence."""
import json
import os
import secrets
import subprocess
import sys

import pytest

from castkit.paths import CASTKIT

PYTHON = sys.executable


@pytest.mark.long
@pytest.mark.timeout(240)
def test_three_reoffers_then_give_up_when_the_media_path_is_cut(tmp_path):
    if os.geteuid() != 0:
        pytest.fail("this test creates a network namespace and needs root (CI runs as root)")
    ns = "castd-giveup-" + secrets.token_hex(3)
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        env = dict(os.environ, CASTD_BUILD=os.environ.get("CASTD_BUILD", "release"))
        r = subprocess.run(["ip", "netns", "exec", ns, PYTHON, str(CASTKIT / "netns_giveup.py"), str(tmp_path)],
                           capture_output=True, text=True, timeout=230, env=env)
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
    lines = [l for l in r.stdout.splitlines() if l.startswith("RESULT ")]
    assert lines, r.stdout[-3000:] + r.stderr[-3000:]
    res = json.loads(lines[-1][len("RESULT "):])
    assert res["exit"] == 1, res
    assert res["said"] == ["castd: Lost the connection to the receiver and gave up after 3 reconnect attempts."], res
    assert res["disconnect"] == [{"reason": "failed"}], res
    assert len(res["offers"]) == 4 and len(set(res["offers"])) == 4, res       # first offer + three re-offers
    assert [(r["level"], r["attempt"], float(r["delay_s"])) for r in res["reconnects"]] == \
        [("notice", "1", 1.0), ("notice", "2", 3.0), ("notice", "3", 7.0)], res
    # One negotiation per offer, numbered by the attempts used before it.
    assert [(n["negotiation"], n["attempt"]) for n in res["negotiations"]] == \
        [(nid, str(i)) for i, nid in enumerate(res["offers"])], res
