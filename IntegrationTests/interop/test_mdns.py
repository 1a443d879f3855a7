"""castd resolves a receiver's `<uuid>.local` host candidate by multicast DNS (RFC 6762) and
ICE selects that host candidate, against a real multicast responder and aiortc, in a network
namespace this test creates (so no multicast leaves the machine). See netns_mdns.py.

- `answer`: castd's query on 224.0.0.251:5353 is answered;
- `announce`: the responder only announces the name, before the candidate is signalled
  (what Chromium does in this container), and castd takes it from its cache. castd joins
  the mDNS group itself only when it sends its first query, so here it never joins: its
  socket on port 5353 hears the announcement because Linux delivers a group's datagrams to
  every socket bound to the port once any socket of the host joined (IP_MULTICAST_ALL, on
  by default) — here the responder's, with Chromium on the same host Chromium's own;
- `silent`: nothing is heard; castd gives the name up after 5 s and ICE connects through
  the peer-reflexive candidate the receiver's checks reveal (the control: without mDNS the
  selected remote is not a host candidate);
- `blocked`: another socket holds port 5353 exclusively; castd says so once and casts anyway
  (peer-reflexive).

Whether castd joined the group is read from the kernel (the users of 224.0.0.251 / ff02::fb
on lo in /proc/net/igmp{,6}, during the cast minus before it): one membership per family it
listens on exactly when it queried (`answer`, `silent`), none otherwise (`announce`, `blocked`).
"""
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from castkit.paths import CASTKIT

PYTHON = sys.executable


@pytest.fixture(scope="module")
def small_clip(tmp_path_factory) -> Path:
    """3 s of colour bars at 320x180, Constrained Baseline, an IDR every second."""
    path = tmp_path_factory.mktemp("clip") / "bars.264"
    subprocess.run([
        "ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", "smptebars=size=320x180:rate=30", "-t", "3",
        "-c:v", "libx264", "-profile:v", "baseline", "-pix_fmt", "yuv420p",
        "-x264-params", "keyint=30:min-keyint=30:scenecut=0:bframes=0", "-f", "h264", str(path),
    ], check=True)
    return path


def expected_memberships(res: dict, queried: bool) -> dict:
    """castd's own group memberships on lo: one per family it listens on there, once it queried."""
    listening = res["listening"][0].get("interfaces", []) if res["listening"] else []
    return {v: int(queried and f"lo/{v}" in listening) for v in ("v4", "v6")}


def run_in_namespace(clip: Path, mode: str) -> dict:
    if os.geteuid() != 0:
        pytest.fail("this test creates a network namespace and needs root (CI runs as root)")
    ns = "castd-mdns-" + secrets.token_hex(3)
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        r = subprocess.run(["ip", "netns", "exec", ns, PYTHON, str(CASTKIT / "netns_mdns.py"), str(clip), mode],
                           capture_output=True, text=True, timeout=110)
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
    lines = [l for l in r.stdout.splitlines() if l.startswith("RESULT ")]
    assert lines, r.stdout[-3000:] + r.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["answer", "announce"])
def test_castd_resolves_a_local_candidate_and_selects_it_as_a_host_candidate(small_clip, mode):
    res = run_in_namespace(small_clip, mode)
    print("MDNS " + json.dumps(res))
    assert res["exit"] == 0, res
    assert res["frames"] >= 30, res
    assert res["listening"] and res["listening"][0]["type"] == "mdnsListening", res
    assert "lo/v4" in res["listening"][0]["interfaces"], res
    # The name resolved to the receiver's address, logged redacted: a keyed per-run tag
    # (issue 17), so the test checks it is not the address and is the same tag as the
    # selected pair's below (one address, one tag, within a run) …
    assert len(res["resolved"]) == 1 and len(res["resolved"][0]["addresses"]) == 1, res
    expected_remote = res["resolved"][0]["addresses"][0]
    assert expected_remote.startswith("v4#") and res["receiver_ip"] not in json.dumps(res["resolved"]), res
    assert res["unresolved"] == [], res
    # … and the pair ICE selected has that host candidate as its remote.
    assert res["stats"]["selectedRemoteType"] == "host", res
    assert res["stats"]["selectedPair"].split(" -> ")[1].startswith(expected_remote + ":"), res
    assert res["stats"]["mdnsResolved"] == 1, res
    assert res["resolved"][0]["fromCache"] == (mode == "announce"), res
    if mode == "answer":
        assert res["queries_heard"] >= 1, res
    else:
        # Resolved from the announcement heard before the candidate: castd never had to ask.
        assert res["queries_heard"] == 0, res
        assert res["selected"][0]["remoteType"] == "host", res
    # castd joins the group when its first query leaves: it joined (IGMP, and MLD where it
    # listens on IPv6) after asking, and never when the announcement had already answered.
    assert res["castd_joined"] == expected_memberships(res, queried=(mode == "answer")), res
    assert res["castd_joined"]["v4"] == (1 if mode == "answer" else 0), res
    assert res["castd_joined_after_exit"] == {"v4": 0, "v6": 0}, res


@pytest.mark.timeout(120)
def test_without_an_answer_the_name_is_given_up_and_ice_uses_the_peer_reflexive_candidate(small_clip):
    res = run_in_namespace(small_clip, "silent")
    print("MDNS " + json.dumps(res))
    assert res["exit"] == 0, res
    assert res["frames"] >= 30, res
    assert res["queries_heard"] >= 2, res           # asked, and asked again
    assert res["castd_joined"]["v4"] == 1 and res["castd_joined"] == expected_memberships(res, queried=True), res
    assert res["resolved"] == [], res
    assert len(res["unresolved"]) == 1, res
    assert res["stats"]["selectedRemoteType"] == "prflx", res
    # The receiver's address, redacted with this run's key: not loopback, not in clear.
    remote = res["stats"]["selectedPair"].split(" -> ")[1]
    assert remote.startswith("v4#") and res["receiver_ip"] not in remote, res


@pytest.mark.timeout(120)
def test_when_port_5353_is_taken_castd_says_so_and_connects_without_mdns(small_clip):
    res = run_in_namespace(small_clip, "blocked")
    print("MDNS " + json.dumps(res))
    assert res["exit"] == 0, res
    assert res["frames"] >= 30, res
    assert [m["type"] for m in res["listening"]] == ["mdnsUnavailable"], res
    assert "5353" in res["listening"][0]["message"] and "Address already in use" in res["listening"][0]["message"], res
    assert res["resolved"] == [] and len(res["unresolved"]) == 1, res   # given up at once
    assert res["castd_joined"] == {"v4": 0, "v6": 0}, res                # no socket, no membership
    assert res["stats"]["selectedRemoteType"] == "prflx", res
