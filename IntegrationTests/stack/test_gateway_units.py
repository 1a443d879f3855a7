"""Unit tests of the gateway's pure parts: no stack needed."""
import base64
import hashlib
import hmac
import struct
import zlib

import pytest

from gateway import ice, stun
from gateway.pairing_codes import grouped, normalize_pin, pin_hmac, qr_token_sha256, retry_after
from gateway.postgrest_query import QueryError, parse_query, select_sql, status_for_sqlstate
from gateway.settings import Settings

# RFC 5769 §2.2 (IPv4 response): transaction id and the XOR-MAPPED-ADDRESS
# attribute for 192.0.2.1:32853.
RFC5769_TXID = bytes.fromhex("b7e7a701bc34d686fa87dfae")
RFC5769_XMA = bytes.fromhex("00200008" "0001a147" "e112a643")


def test_xor_mapped_address_matches_rfc5769_ipv4_vector():
    value = stun.xor_mapped_address("192.0.2.1", 32853, RFC5769_TXID)
    assert stun.attribute(0x0020, value) == RFC5769_XMA


def test_xor_mapped_address_matches_rfc5769_ipv6_vector():
    # RFC 5769 §2.3: 2001:db8:1234:5678:11:2233:4455:6677 port 32853
    value = stun.xor_mapped_address("2001:db8:1234:5678:11:2233:4455:6677", 32853, RFC5769_TXID)
    assert value == bytes.fromhex("0002a147" "0113a9fa" "a5d3f179" "bc25f4b5" "bed2b9d9")


def test_binding_success_is_byte_exact_without_software():
    resp = stun.binding_success(RFC5769_TXID, "192.0.2.1", 32853, software=None)
    head = bytes.fromhex("0101" "0014" "2112a442") + RFC5769_TXID
    crc = (zlib.crc32(head + RFC5769_XMA) & 0xFFFFFFFF) ^ 0x5354554E
    assert resp == head + RFC5769_XMA + bytes.fromhex("80280004") + struct.pack("!I", crc)
    assert len(resp) == 20 + 12 + 8


def test_binding_success_pads_software_to_four_bytes():
    resp = stun.binding_success(RFC5769_TXID, "127.0.0.1", 5000, software=b"abcde")
    # header 20 + XMA 12 + SOFTWARE 4+5+3 pad + FINGERPRINT 8
    assert len(resp) == 20 + 12 + 12 + 8
    assert resp[32:44] == bytes.fromhex("80220005") + b"abcde" + b"\x00\x00\x00"
    assert struct.unpack("!H", resp[2:4])[0] == len(resp) - 20


def test_parse_binding_request_accepts_a_plain_request_and_one_with_attributes():
    req = bytes.fromhex("0001" "0000" "2112a442") + RFC5769_TXID
    assert stun.parse_binding_request(req) == RFC5769_TXID
    with_attr = bytes.fromhex("0001" "0008" "2112a442") + RFC5769_TXID + bytes.fromhex("80220003") + b"abc\x00"
    assert stun.parse_binding_request(with_attr) == RFC5769_TXID


@pytest.mark.parametrize("data", [
    b"",
    bytes(19),
    bytes.fromhex("0001" "0000" "2112a443") + RFC5769_TXID,  # wrong cookie
    bytes.fromhex("0101" "0000" "2112a442") + RFC5769_TXID,  # a response, not a request
    bytes.fromhex("0001" "0004" "2112a442") + RFC5769_TXID,  # length beyond the datagram
    bytes.fromhex("c001" "0000" "2112a442") + RFC5769_TXID,  # top bits set (not STUN)
    bytes.fromhex("0001" "0004" "2112a442") + RFC5769_TXID + bytes.fromhex("80220008"),  # attribute overruns
    bytes.fromhex("0001" "0002" "2112a442") + RFC5769_TXID + b"\x00\x00",  # length not a multiple of 4
])
def test_parse_binding_request_rejects_malformed_input(data):
    assert stun.parse_binding_request(data) is None


def test_turn_credentials_follow_the_turn_rest_scheme():
    user, cred = ice.turn_credentials("s3cret", "b87e7450-7fd5-466f-ac15-a42b3b6364f8", 1796020849)
    assert user == "1796020849:b87e7450-7fd5-466f-ac15-a42b3b6364f8"
    assert cred == base64.b64encode(hmac.new(b"s3cret", user.encode(), hashlib.sha1).digest()).decode()
    assert len(base64.b64decode(cred)) == 20


def test_ice_config_without_and_with_turn():
    s = Settings(jwt_secret="x", anon_key="y", pin_secret="z", stun_port=4000)
    assert ice.ice_config(s, "u", 100) == {"iceServers": [{"urls": ["stun:127.0.0.1:4000"]}], "turnConfigured": False}
    t = Settings(jwt_secret="x", anon_key="y", pin_secret="z", stun_port=4000,
                 turn_urls=("turn:127.0.0.1:3478?transport=udp",), turn_secret="k", turn_credential_ttl=60)
    cfg = ice.ice_config(t, "u", 100)
    assert cfg["turnConfigured"] is True
    assert cfg["iceServers"][1]["urls"] == ["turn:127.0.0.1:3478?transport=udp"]
    assert cfg["iceServers"][1]["username"] == "160:u"


def test_settings_repr_hides_secrets():
    s = Settings(jwt_secret="jwt-secret-value", anon_key="k", pin_secret="pin-secret-value", pg_password="pw-value")
    assert "secret-value" not in repr(s) and "pw-value" not in repr(s)


def test_normalize_pin_strips_everything_but_digits():
    assert normalize_pin("482 913") == "482913"
    assert normalize_pin(" 48-29.13\n") == "482913"
    assert normalize_pin("４８２９１３") == ""  # fullwidth digits are not ASCII digits
    assert normalize_pin(482913) == "482913"
    assert grouped("482913") == "482 913"


def test_pin_hmac_and_qr_hash_are_the_stored_forms():
    assert pin_hmac("k", "482913") == hmac.new(b"k", b"482913", hashlib.sha256).hexdigest()
    assert qr_token_sha256("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_retry_after_counts_until_enough_failures_leave_the_window():
    assert retry_after([], 5, 600) is None
    assert retry_after([1, 2, 3, 4], 5, 600) is None
    # five failures, the oldest 100 s ago → free in 500 s
    assert retry_after([100, 50, 40, 30, 20], 5, 600) == 500
    # seven failures: three must leave; the third oldest is 90 s old → 510 s
    assert retry_after([120, 100, 90, 30, 20, 10, 5], 5, 600) == 510
    # ages outside the window do not count
    assert retry_after([700, 650, 10, 9, 8, 7], 5, 600) is None
    # never less than one second
    assert retry_after([599.9, 1, 1, 1, 1], 5, 600) == 1


COLS = {"id": "uuid", "session_id": "uuid", "recipient_role": "text", "payload": "jsonb",
        "created_at": "timestamp with time zone"}


def test_parse_query_builds_filters_order_and_limit():
    q = parse_query([("select", "id,payload"), ("session_id", "eq.abc"), ("recipient_role", "neq.sender"),
                     ("order", "created_at.desc.nullslast"), ("limit", "3"), ("apikey", "k")], COLS)
    assert q.columns == ["id", "payload"]
    assert q.params == ["abc", "sender"]
    assert select_sql("signaling_messages", q) == (
        "select coalesce(json_agg(_r), '[]')::text, count(*) from (select \"id\", \"payload\" from "
        "public.\"signaling_messages\" where \"session_id\" = ($1::text)::uuid and \"recipient_role\" <> "
        "($2::text)::text order by \"created_at\" desc nulls last limit 3) _r")


def test_parse_query_in_and_is_and_not():
    q = parse_query([("id", "in.(a,b)"), ("payload", "is.null"), ("recipient_role", "not.eq.x")], COLS)
    assert q.where == ['"id" = any(($1::text[])::uuid[])', '"payload" is null',
                       'not ("recipient_role" = ($2::text)::text)']
    assert q.params == [["a", "b"], "x"]


@pytest.mark.parametrize("items,code", [
    ([("nope", "eq.1")], "42703"),
    ([("select", "id,nope")], "42703"),
    ([("id", "like.x")], "PGRST100"),
    ([("id", "eq")], "PGRST100"),
    ([("limit", "-1")], "PGRST100"),
    ([("order", "id.sideways")], "PGRST100"),
    ([("payload", "is.maybe")], "PGRST100"),
])
def test_parse_query_refuses_what_postgrest_refuses(items, code):
    with pytest.raises(QueryError) as e:
        parse_query(items, COLS)
    assert e.value.code == code and e.value.status == 400


@pytest.mark.parametrize("sqlstate,role,status", [
    ("42501", "authenticated", 403), ("42501", "anon", 401), ("P0001", "authenticated", 400),
    ("P0429", "authenticated", 500), ("54000", "authenticated", 500), ("PT418", "authenticated", 418),
    ("23505", "authenticated", 409), ("23503", "authenticated", 409), ("42P01", "authenticated", 404),
    ("22P02", "authenticated", 400),
])
def test_sqlstate_to_http_status_as_postgrest(sqlstate, role, status):
    assert status_for_sqlstate(sqlstate, role) == status


def test_stun_parser_survives_random_and_mutated_datagrams():
    # A seeded, bounded stand-in for a fuzzer (the gateway is Python, outside
    # the libFuzzer package): never raises, and only accepts what it can answer.
    import random
    rng = random.Random(5389)
    valid = bytes.fromhex("0001" "0008" "2112a442") + RFC5769_TXID + bytes.fromhex("80220003") + b"abc\x00"
    for i in range(20000):
        if i % 2:
            data = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 64)))
        else:
            b = bytearray(valid)
            for _ in range(rng.randrange(1, 4)):
                b[rng.randrange(len(b))] = rng.getrandbits(8)
            data = bytes(b[: rng.randrange(len(b) + 1)]) if rng.random() < 0.3 else bytes(b)
        txid = stun.parse_binding_request(data)
        if txid is not None:
            assert len(txid) == 12 and data[:2] == b"\x00\x01" and data[4:8] == bytes.fromhex("2112a442")
            resp = stun.binding_success(txid, "127.0.0.1", 9)
            assert resp[8:20] == txid
