"""Unit tests of the Realtime protocol core (no stack, no sockets, no clock).

They pin down the wire shapes of docs/contract.md, wire C, with exact JSON text.
"""

from __future__ import annotations

import json

import pytest


from gateway import realtime_protocol as proto

ANON = "sb_publishable_test"
T0 = 1_800_000_000.0


class ExpiredSignatureError(Exception):
    """Stands in for jwt.ExpiredSignatureError (matched by name, as PyJWT's is)."""


class InvalidTokenError(Exception):
    pass


TOKENS = {
    "alice": {"sub": "a1", "role": "authenticated", "exp": T0 + 100},
    "bob": {"sub": "b2", "role": "authenticated", "exp": T0 + 50},
    "service": {"role": "service_role", "exp": T0 + 100},
}


def verify(token: str) -> dict:
    if token == "expired":
        raise ExpiredSignatureError("Signature has expired")
    if token not in TOKENS:
        raise InvalidTokenError("bad")
    return dict(TOKENS[token])


def state(vsn: str = proto.VSN_1, idle: float = 60.0) -> proto.SocketState:
    return proto.SocketState(vsn=vsn, verify=verify, anon_key=ANON, idle_timeout=idle, last_seen=T0)


def v1(topic, event, payload, ref, join_ref=None) -> str:
    return json.dumps({"topic": topic, "event": event, "payload": payload, "ref": ref, "join_ref": join_ref})


SUBS = [
    {"event": "UPDATE", "schema": "public", "table": "casting_sessions", "filter": "id=eq.11111111-1111-1111-1111-111111111111"},
    {"event": "INSERT", "schema": "public", "table": "signaling_messages", "filter": "session_id=eq.11111111-1111-1111-1111-111111111111"},
]


def join(s: proto.SocketState, topic="realtime:s1", subs=SUBS, token="alice", ref="1", now=T0):
    payload = {"config": {"broadcast": {"ack": False, "self": False}, "presence": {"key": "", "enabled": False},
                          "postgres_changes": subs, "private": False}}
    if token is not None:
        payload["access_token"] = token
    if s.vsn == proto.VSN_2:
        return s.on_frame(json.dumps([ref, ref, topic, "phx_join", payload]), now)
    return s.on_frame(v1(topic, "phx_join", payload, ref, ref), now)


# ---- envelopes -----------------------------------------------------------


def test_vsn1_server_frame_is_an_object_with_topic_event_payload_ref():
    assert proto.encode_frame(proto.VSN_1, "realtime:x", "phx_reply", {"status": "ok", "response": {}}, "7", "3") == \
        '{"topic":"realtime:x","event":"phx_reply","payload":{"status":"ok","response":{}},"ref":"7"}'


def test_vsn2_server_push_is_an_array_with_null_refs():
    assert proto.encode_frame(proto.VSN_2, "realtime:x", "system", {"a": 1}) == '[null,null,"realtime:x","system",{"a":1}]'


def test_vsn2_decode_reads_join_ref_ref_topic_event_payload():
    f = proto.decode_frame('["1","2","realtime:x","phx_join",{"k":1}]', proto.VSN_2)
    assert (f.join_ref, f.ref, f.topic, f.event, f.payload) == ("1", "2", "realtime:x", "phx_join", {"k": 1})


def test_decode_accepts_integer_refs_and_null_payload():
    f = proto.decode_frame('{"topic":"phoenix","event":"heartbeat","payload":null,"ref":5}', proto.VSN_1)
    assert (f.ref, f.payload) == ("5", {})


@pytest.mark.parametrize("text,vsn,reason", [
    ("{not json", proto.VSN_1, "invalid JSON"),
    ('["1","2","t","e"]', proto.VSN_2, "expected an array [join_ref, ref, topic, event, payload]"),
    ('{"topic":"t","event":"e","payload":[]}', proto.VSN_1, "payload must be an object"),
    ('{"topic":"t","event":5}', proto.VSN_1, "event must be a string"),
    ('{"topic":"t","event":"e","ref":true}', proto.VSN_1, "ref must be a string or null"),
])
def test_malformed_frames_are_refused_with_a_reason(text, vsn, reason):
    with pytest.raises(proto.MalformedFrame) as e:
        proto.decode_frame(text, vsn)
    assert e.value.reason == reason


def test_malformed_frame_with_a_topic_gets_an_error_reply_and_one_without_is_ignored():
    s = state()
    assert s.on_frame("{not json", T0) == []
    out = s.on_frame('{"topic":"realtime:x","event":"phx_join","payload":"x","ref":"4"}', T0)
    assert out == ['{"topic":"realtime:x","event":"phx_reply","payload":{"status":"error","response":'
                   '{"reason":"malformed message: payload must be an object"}},"ref":"4"}']


# ---- join ----------------------------------------------------------------


def test_join_reply_lists_integer_ids_in_request_order_then_system_subscribed():
    s = state()
    out = join(s)
    assert len(out) == 2
    reply = json.loads(out[0])
    assert reply["topic"] == "realtime:s1" and reply["event"] == "phx_reply" and reply["ref"] == "1"
    assert reply["payload"]["status"] == "ok"
    pcs = reply["payload"]["response"]["postgres_changes"]
    assert [p["event"] for p in pcs] == ["UPDATE", "INSERT"]
    assert [p["table"] for p in pcs] == ["casting_sessions", "signaling_messages"]
    assert [p["filter"] for p in pcs] == [SUBS[0]["filter"], SUBS[1]["filter"]]
    assert all(type(p["id"]) is int and 0 <= p["id"] < 2**27 for p in pcs)
    assert pcs[0]["id"] != pcs[1]["id"]
    assert out[1] == ('{"topic":"realtime:s1","event":"system","payload":{"extension":"postgres_changes",'
                      '"status":"ok","message":"Subscribed to PostgreSQL","channel":"s1"},"ref":null}')


def test_subscription_ids_are_stable_for_the_same_params():
    a = proto.parse_subscriptions({"postgres_changes": SUBS})
    b = proto.parse_subscriptions({"postgres_changes": [dict(x) for x in SUBS]})
    assert [x.id for x in a] == [x.id for x in b]


def test_join_without_postgres_changes_still_has_the_key():
    s = state(proto.VSN_2)
    out = s.on_frame('["3","3","realtime:empty","phx_join",{"config":{},"access_token":"alice"}]', T0)
    assert out[0] == '["3","3","realtime:empty","phx_reply",{"status":"ok","response":{"postgres_changes":[]}}]'
    assert out[1] == ('[null,null,"realtime:empty","system",{"extension":"postgres_changes","status":"ok",'
                      '"message":"Subscribed to PostgreSQL","channel":"empty"}]')


def test_join_with_expired_token_is_refused():
    s = state()
    out = join(s, token="expired")
    assert json.loads(out[0])["payload"] == {"status": "error", "response": {"reason": "InvalidJWTToken: Token has expired"}}
    assert s.channels == {}


def test_join_with_forged_token_is_refused():
    out = join(state(), token="forged")
    assert json.loads(out[0])["payload"]["response"]["reason"] == "InvalidJWTToken: the token could not be verified"


def test_join_with_a_service_role_token_is_refused():
    out = join(state(), token="service")
    assert json.loads(out[0])["payload"]["response"]["reason"] == "InvalidJWTToken: role not allowed"


def test_join_with_the_publishable_key_or_no_token_is_anon():
    s = state()
    join(s, topic="realtime:a", token=ANON)
    join(s, topic="realtime:b", token=None)
    assert s.channels["realtime:a"].claims == {"role": "anon"}
    assert s.channels["realtime:b"].claims == {"role": "anon"}
    assert s.channels["realtime:a"].expires_at is None


@pytest.mark.parametrize("sub,reason", [
    ({"event": "TRUNCATE", "schema": "public", "table": "t"}, "postgres_changes event must be one of INSERT, UPDATE, DELETE, *"),
    ({"event": "INSERT", "schema": "public", "table": "t", "filter": "id=like.x"}, "unsupported filter operator 'like' (use eq, neq, lt, lte, gt, gte, in)"),
    ({"event": "INSERT", "schema": "public", "table": "t", "filter": "id"}, "filter must look like column=op.value, got 'id'"),
])
def test_join_with_an_invalid_subscription_is_refused(sub, reason):
    out = join(state(), subs=[sub])
    assert json.loads(out[0])["payload"] == {"status": "error", "response": {"reason": f"invalid postgres_changes: {reason}"}}


def test_join_on_a_non_realtime_topic_is_unmatched():
    out = state().on_frame(v1("room:lobby", "phx_join", {}, "1", "1"), T0)
    assert json.loads(out[0])["payload"] == {"status": "error", "response": {"reason": "unmatched topic"}}


def test_second_join_on_the_same_topic_closes_the_first():
    s = state()
    join(s, ref="1")
    out = join(s, ref="5")
    assert out[0] == '{"topic":"realtime:s1","event":"phx_close","payload":{},"ref":"1"}'
    assert json.loads(out[1])["ref"] == "5"
    assert s.channels["realtime:s1"].join_ref == "5"


# ---- heartbeat, unmatched, leave -------------------------------------------


def test_heartbeat_is_answered_in_both_versions():
    assert state().on_frame(v1("phoenix", "heartbeat", {}, "9"), T0) == \
        ['{"topic":"phoenix","event":"phx_reply","payload":{"status":"ok","response":{}},"ref":"9"}']
    assert state(proto.VSN_2).on_frame('[null,"9","phoenix","heartbeat",{}]', T0) == \
        ['[null,"9","phoenix","phx_reply",{"status":"ok","response":{}}]']


def test_push_to_a_topic_not_joined_is_unmatched():
    assert state(proto.VSN_2).on_frame('["4","6","realtime:nope","access_token",{"access_token":"alice"}]', T0) == \
        ['["4","6","realtime:nope","phx_reply",{"status":"error","response":{"reason":"unmatched topic"}}]']


def test_leave_replies_ok_then_closes_with_the_join_ref():
    s = state(proto.VSN_2)
    s.on_frame('["2","2","realtime:s1","phx_join",{"config":{},"access_token":"alice"}]', T0)
    out = s.on_frame('["2","8","realtime:s1","phx_leave",{}]', T0)
    assert out == ['["2","8","realtime:s1","phx_reply",{"status":"ok","response":{}}]',
                   '["2","2","realtime:s1","phx_close",{}]']
    assert s.channels == {}


# ---- tokens and time -------------------------------------------------------


def test_access_token_replaces_the_claims_without_a_reply():
    s = state()
    join(s, token="bob")
    assert s.next_deadline() == T0 + 50
    out = s.on_frame(v1("realtime:s1", "access_token", {"access_token": "alice"}, "2", "1"), T0 + 10)
    assert out == []
    assert s.channels["realtime:s1"].claims["sub"] == "a1"
    assert s.next_deadline() == T0 + 10 + 60  # idle deadline now comes first (alice expires at T0+100)


def test_invalid_access_token_errors_and_closes_the_channel():
    s = state()
    join(s)
    out = s.on_frame(v1("realtime:s1", "access_token", {"access_token": "forged"}, "2", "1"), T0)
    assert [json.loads(x)["event"] for x in out] == ["system", "phx_close"]
    sys_payload = json.loads(out[0])["payload"]
    assert sys_payload["status"] == "error" and sys_payload["channel"] == "s1"
    assert sys_payload["message"].startswith("Received an invalid access token from client")
    assert out[1] == '{"topic":"realtime:s1","event":"phx_close","payload":{},"ref":"1"}'
    assert "realtime:s1" not in s.channels


def test_token_expiry_pushes_system_error_then_closes_only_that_channel():
    s = state()
    join(s, topic="realtime:bob", token="bob", ref="1")
    join(s, topic="realtime:alice", token="alice", ref="3")
    assert s.next_deadline() == T0 + 50
    assert s.on_tick(T0 + 49.9) == []
    out = s.on_tick(T0 + 52.5)
    assert out == ['{"topic":"realtime:bob","event":"system","payload":{"extension":"system","status":"error",'
                   '"message":"Token has expired 2 seconds ago","channel":"bob"},"ref":null}',
                   '{"topic":"realtime:bob","event":"phx_close","payload":{},"ref":"1"}']
    assert list(s.channels) == ["realtime:alice"]
    assert s.close_reason is None


def test_socket_without_frames_for_the_idle_timeout_is_closed():
    s = state(idle=60)
    s.on_frame(v1("phoenix", "heartbeat", {}, "1"), T0 + 30)
    assert s.next_deadline() == T0 + 90
    s.on_tick(T0 + 89)
    assert s.close_reason is None
    s.on_tick(T0 + 90)
    assert s.close_reason == "heartbeat timeout"
    assert s.next_deadline() is None


# ---- filters ---------------------------------------------------------------

TYPES = {"id": "uuid", "n": "int4", "ok": "bool", "at": "timestamptz", "role": "text"}


@pytest.mark.parametrize("flt,record,expected", [
    ("id=eq.AAAAAAAA-0000-0000-0000-000000000001", {"id": "aaaaaaaa-0000-0000-0000-000000000001"}, True),
    ("id=eq.aaaaaaaa-0000-0000-0000-000000000002", {"id": "aaaaaaaa-0000-0000-0000-000000000001"}, False),
    ("role=neq.sender", {"role": "receiver"}, True),
    ("role=neq.sender", {"role": None}, False),  # SQL: NULL <> x is not true
    ("n=lt.10", {"n": 9}, True),
    ("n=lt.10", {"n": 10}, False),
    ("n=lte.10", {"n": 10}, True),
    ("n=gt.9", {"n": 10}, True),
    ("n=gt.10", {"n": 9}, False),
    ("n=gte.10.0", {"n": 10}, True),  # compared as numbers, not text
    ("n=eq.abc", {"n": 1}, False),
    ("ok=eq.true", {"ok": True}, True),
    ("ok=eq.f", {"ok": True}, False),
    ("at=gt.2026-01-01T00:00:00Z", {"at": "2026-01-01T00:00:00.5+00:00"}, True),
    ("at=lt.2026-01-01T01:00:00+01:00", {"at": "2026-01-01T00:00:00.5+00:00"}, False),
    ("role=in.(sender,receiver)", {"role": "receiver"}, True),
    ('role=in.("a,b",c)', {"role": "a,b"}, True),
    ("role=in.(sender)", {"role": "receiver"}, False),
    ("missing=eq.x", {"role": "x"}, False),
])
def test_filter_matches_as_the_column_type(flt, record, expected):
    assert proto.parse_filter(flt).matches(record, TYPES) is expected


def test_in_filter_splits_quoted_values():
    assert proto.parse_filter('role=in.("a,b", c ,"d\\"e")').values == ("a,b", "c", 'd"e')


@pytest.mark.parametrize("text", ["=eq.1", "a b=eq.1", "id=eq", "id=in.1,2", "id=in.()", 'id=in.("a)'])
def test_bad_filters_are_refused(text):
    with pytest.raises(ValueError):
        proto.parse_filter(text)


# ---- changes ---------------------------------------------------------------

SID = "11111111-1111-1111-1111-111111111111"
COLUMNS = [{"name": "id", "type": "uuid"}, {"name": "session_id", "type": "uuid"},
           {"name": "recipient_role", "type": "text"}, {"name": "payload", "type": "jsonb"}]


def test_parse_change_reads_the_trigger_payload():
    c = proto.parse_change('{"schema":"public","table":"signaling_messages","type":"INSERT",'
                           '"id":"22222222-2222-2222-2222-222222222222","commit_timestamp":"2026-10-20T12:40:00.123Z"}')
    assert c == proto.Change("public", "signaling_messages", "INSERT", "22222222-2222-2222-2222-222222222222",
                             "2026-10-20T12:40:00.123Z")
    with pytest.raises(ValueError):
        proto.parse_change('{"schema":"public","table":"t","type":"TRUNCATE","id":1,"commit_timestamp":"x"}')


def test_insert_push_carries_ids_record_columns_and_no_old_record():
    s = state()
    join(s)
    ch = s.channels["realtime:s1"]
    change = proto.Change("public", "signaling_messages", "INSERT", "m1", "2026-10-20T12:40:00.123Z")
    record = {"id": "m1", "session_id": SID, "recipient_role": "sender", "payload": {"a": [1, 2]}}
    frame = s.change_frame(ch, change, COLUMNS, record)
    assert json.loads(frame) == {
        "topic": "realtime:s1", "event": "postgres_changes", "ref": None,
        "payload": {"ids": [ch.subs[1].id], "data": {
            "schema": "public", "table": "signaling_messages", "commit_timestamp": "2026-10-20T12:40:00.123Z",
            "type": "INSERT", "columns": COLUMNS, "record": record, "errors": None}}}


def test_update_push_adds_old_record_with_the_key_only():
    s = state(proto.VSN_2)
    join(s)
    ch = s.channels["realtime:s1"]
    change = proto.Change("public", "casting_sessions", "UPDATE", SID, "2026-10-20T12:40:00.123Z")
    frame = json.loads(s.change_frame(ch, change, [{"name": "id", "type": "uuid"}], {"id": SID, "status": "connecting"}))
    assert frame[:4] == [None, None, "realtime:s1", "postgres_changes"]
    assert frame[4]["ids"] == [ch.subs[0].id]
    assert frame[4]["data"]["old_record"] == {"id": SID}


def test_change_not_matching_the_filter_or_event_is_not_pushed():
    s = state()
    join(s)
    ch = s.channels["realtime:s1"]
    other = {"id": "m1", "session_id": "99999999-1111-1111-1111-111111111111", "recipient_role": "sender", "payload": {}}
    insert = proto.Change("public", "signaling_messages", "INSERT", "m1", "t")
    assert s.change_frame(ch, insert, COLUMNS, other) is None
    update = proto.Change("public", "signaling_messages", "UPDATE", "m1", "t")
    assert ch.wants(update) is False
    assert s.interested(update) == []
    assert s.interested(insert) == [ch]


def test_star_event_and_missing_table_match_every_change_of_the_schema():
    s = state()
    join(s, subs=[{"event": "*", "schema": "public"}])
    ch = s.channels["realtime:s1"]
    for kind in ("INSERT", "UPDATE"):
        change = proto.Change("public", "casting_sessions", kind, SID, "t")
        assert json.loads(s.change_frame(ch, change, COLUMNS[:1], {"id": SID}))["payload"]["ids"] == [ch.subs[0].id]
    assert ch.wants(proto.Change("auth", "users", "INSERT", SID, "t")) is False


def test_change_for_a_channel_that_left_meanwhile_is_dropped():
    s = state()
    join(s)
    ch = s.channels["realtime:s1"]
    s.on_frame(v1("realtime:s1", "phx_leave", {}, "2", "1"), T0)
    change = proto.Change("public", "casting_sessions", "UPDATE", SID, "t")
    assert s.change_frame(ch, change, COLUMNS[:1], {"id": SID}) is None


def test_nan_filter_value_matches_nothing_instead_of_raising():
    f = proto.parse_filter("n=lt.NaN")
    assert f.matches({"n": 1}, TYPES) is False
    assert proto.parse_filter("n=eq.sNaN").matches({"n": 1}, TYPES) is False


def test_random_garbage_never_raises_and_never_kills_the_state():
    """A seeded mutation fuzz of client frames: on_frame answers or ignores,
    never raises, and the socket still answers a heartbeat afterwards."""
    import random

    rng = random.Random(20261130)
    seeds = [
        v1("realtime:s1", "phx_join", {"config": {"postgres_changes": SUBS}, "access_token": "alice"}, "1", "1"),
        '["1","1","realtime:s1","phx_join",{"config":{"postgres_changes":[{"event":"*","schema":"public","filter":"n=in.(1,2)"}]}}]',
        v1("realtime:s1", "access_token", {"access_token": "bob"}, "2", "1"),
        v1("phoenix", "heartbeat", {}, "3"),
        v1("realtime:s1", "phx_leave", {}, "4", "1"),
    ]
    alphabet = list('{}[]",:.=()\\0123456789abcdefnulltrue') + ["\u00e9", "\x00", "null", "[[[[", "}}}}"]
    for vsn in (proto.VSN_1, proto.VSN_2):
        s = state(vsn)
        for i in range(3000):
            text = list(rng.choice(seeds))
            for _ in range(rng.randint(1, 6)):
                op = rng.randrange(3)
                pos = rng.randrange(len(text) + 1)
                if op == 0:
                    text.insert(pos, rng.choice(alphabet))
                elif op == 1 and text:
                    del text[min(pos, len(text) - 1)]
                elif text:
                    text[min(pos, len(text) - 1)] = rng.choice(alphabet)
            out = s.on_frame("".join(text), T0 + i * 0.001)
            assert all(isinstance(x, str) for x in out)
            s.on_tick(T0 + i * 0.001)
        ch = proto.Change("public", "signaling_messages", "INSERT", "m", "t")
        for c in s.interested(ch):
            s.change_frame(c, ch, COLUMNS, {"id": "m", "n": "x", "session_id": SID})
        hb = '[null,"hb","phoenix","heartbeat",{}]' if vsn == proto.VSN_2 else v1("phoenix", "heartbeat", {}, "hb")
        assert json.loads(s.on_frame(hb, T0 + 10)[0])  # still answering
    deep = "[" * 100_000
    assert state().on_frame(deep, T0) == []


def test_replies_stay_valid_utf8_even_for_a_lone_surrogate_in_the_topic():
    out = state().on_frame('{"topic":"realtime:\\ud800","event":"phx_join","payload":{},"ref":"1"}', T0)
    out[0].encode("utf-8")  # would raise for an unescaped surrogate
    assert '"topic":"realtime:\\ud800"' in out[0]
    # Ordinary non-ASCII text goes out as UTF-8, unescaped.
    assert proto.encode_frame(proto.VSN_1, "realtime:é", "system", {}) == '{"topic":"realtime:é","event":"system","payload":{},"ref":null}'
