"""castkit/fuzz_seeds.py (Scripts/fuzz-seeds) and the seeds it committed in Fuzz/Seeds/:
the pieces that cut captures into seeds, the token scrubbing, the committed files'
limits, and one real capture through a stack.
"""
from __future__ import annotations

import hashlib
import os
import struct
import zlib
from pathlib import Path

import pytest

from castkit import fuzz_seeds as fs

REPO = Path(__file__).resolve().parents[2]
SEEDS = REPO / "Fuzz" / "Seeds"
A_JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJyZWFsLXVzZXIifQ.c2lnbmF0dXJlLXRoYXQtaXMtcmVhbA"


def test_scrub_replaces_jwts_and_secret_fields_and_keeps_the_rest():
    body = f'{{"access_token":"{A_JWT}","refresh_token":"r3fr3sh","token_type":"bearer","expires_in":3600}}'
    out = fs.scrub(body)
    assert A_JWT not in out and "r3fr3sh" not in out
    assert f'"access_token":"{fs.DUMMY_JWT}"' in out
    assert '"refresh_token":"dummy-secret"' in out
    assert '"token_type":"bearer","expires_in":3600' in out
    assert fs.scrub("no secrets here") == "no secrets here"


def test_ws_frames_unmasks_and_inflates_permessage_deflate_with_context_takeover():
    deflate = zlib.compressobj(wbits=-15)
    messages = [b'{"event":"phx_reply"}', b'{"event":"phx_reply","again":1}']
    wire = b""
    for m in messages:  # the server keeps its window between messages (no_context_takeover absent)
        c = deflate.compress(m) + deflate.flush(zlib.Z_SYNC_FLUSH)
        assert c.endswith(b"\x00\x00\xff\xff")
        wire += fs.ws_encode(0xC1, c[:-4])  # FIN + RSV1 + text
    wire += fs.ws_encode(0x89, b"ping", mask=b"\x01\x02\x03\x04")
    wire += b"\x81\x05ab"  # a cut frame at the end is left out
    frames = fs.ws_frames(wire)
    assert [(b0, masked, p) for b0, masked, p in frames] == [
        (0x81, 0, messages[0]), (0x81, 0, messages[1]), (0x89, 1, b"ping")]


def test_split_http_reads_length_and_chunked_bodies_and_stops_at_the_upgrade():
    stream = (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
              b"HTTP/1.1 500 X\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n[1,\r\n2\r\n2]\r\n0\r\n\r\n"
              b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n\x81\x00")
    msgs, rest = fs.split_http(stream, responses=True)
    assert [(m[0].split(" ")[1], m[2]) for m in msgs] == [("200", b"{}"), ("500", b"[1,2]"), ("101", b"")]
    assert rest == b"\x81\x00"


def test_candidate_ports_come_from_sdp_lines_and_trickled_rows():
    sdp = "v=0\r\na=candidate:1 1 udp 2130706431 192.0.2.2 40001 typ host\r\na=mid:0\r\n"
    rows = [{"payload": {"candidate": "candidate:2 1 udp 1 192.0.2.2 40002 typ host"}}, {"payload": {"sdp": "x"}}]
    assert fs.candidate_ports([sdp], rows) == {40001, 40002}


def test_committed_seeds_are_small_named_by_hash_tokenless_and_cover_every_network_target():
    targets = {d.name.removeprefix("Fuzz") for d in (REPO / "Fuzz" / "Sources").iterdir()}
    have = {d.name for d in SEEDS.iterdir()}
    # Smoke fuzzes ByteReader (no network input); Session drives the session machine from
    # random rows and times built out of the fuzzer's bytes, which no capture can seed.
    assert have == targets - {"Smoke", "Session"}
    for d in SEEDS.iterdir():
        files = list(d.iterdir())
        captured = [f for f in files if not f.name.startswith("regression-")]
        assert 1 <= len(captured) <= fs.MAX_FILES, d
        for f in files:
            data = f.read_bytes()
            assert 0 < len(data) <= fs.MAX_BYTES, f
            assert f.name.removeprefix("regression-") == hashlib.sha1(data).hexdigest(), f
    assert fs.leaked_tokens(SEEDS) == []


@pytest.mark.timeout(120)
def test_a_real_capture_gives_seeds_for_every_target(stack, tmp_path):
    if os.geteuid() != 0:
        pytest.fail("the capture needs root (an AF_PACKET socket on lo)")
    kept = tmp_path / "SDP" / "regression-0123"
    kept.parent.mkdir()
    kept.write_text("v=0")
    counts, summary = fs.generate(stack, tmp_path, seconds=1.0)
    assert kept.read_text() == "v=0"  # regression seeds survive a regeneration
    kept.unlink()
    # TURN's seeds come from a coturn capture, RTPVP8's are libvpx frames and LogLine's are
    # castd's own log lines (docs/fuzzing.md), not from the stack's cast.
    assert set(counts) == {d.name for d in SEEDS.iterdir()} - {"TURN", "RTPVP8", "LogLine"}, summary
    assert all(n >= 1 for n in counts.values()), counts
    # Real traffic of each kind made it in: a DTLS handshake record, STUN with a magic
    # cookie, an RTCP sender report, a Realtime reply, an SPS in an access unit.
    def some(target, pred):
        return any(pred(p.read_bytes()) for p in (tmp_path / target).iterdir())
    assert some("DTLS", lambda b: b"\x16\xfe\xfd" in b)
    assert some("STUN", lambda b: b[4:8] == struct.pack("!I", 0x2112A442))
    assert some("RTPRTCP", lambda b: b[1] == 200)
    assert some("SignalingPhoenix", lambda b: b"phx_reply" in b)
    assert some("RTPH264", lambda b: b"\x00\x00\x00\x01\x67" in b or b"\x00\x00\x01\x67" in b)
    assert fs.leaked_tokens(tmp_path) == []
