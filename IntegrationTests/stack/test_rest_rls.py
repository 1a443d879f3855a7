"""/rest/v1 under RLS (docs/contract.md "Endpoints and the backend's rules", spec §6), through
the official supabase client where it can express the request, and raw
HTTP for the malformed ones."""
import time

import jwt
import pytest
from postgrest.exceptions import APIError

from castkit.devstack import db, paired_session, rest, sign_in, supabase_client

OFFER = {"type": "offer", "sdp": "v=0\r\n", "negotiationId": "5b2f7c1e-0000-4000-8000-000000000001"}


def row(sid, sender_role, recipient_role, message_type="offer", payload=None):
    return {"session_id": sid, "sender_role": sender_role, "recipient_role": recipient_role,
            "message_type": message_type, "payload": OFFER if payload is None else payload}


@pytest.fixture
def parties(stack):
    rc, receiver = supabase_client(stack)
    sc, sender = supabase_client(stack)
    ps = paired_session(stack, receiver=receiver, sender=sender)
    return ps, rc, sc


def test_sender_and_receiver_each_read_only_rows_addressed_to_them(parties):
    ps, rc, sc = parties
    sc.table("signaling_messages").insert(row(ps.session_id, "sender", "receiver"), returning="minimal").execute()
    rc.table("signaling_messages").insert(
        row(ps.session_id, "receiver", "sender", "answer", {"type": "answer", "sdp": "v=0\r\n",
                                                             "negotiationId": OFFER["negotiationId"]}),
        returning="minimal").execute()
    to_receiver = rc.table("signaling_messages").select("*").eq("session_id", ps.session_id) \
        .order("created_at").execute().data
    to_sender = sc.table("signaling_messages").select("*").eq("session_id", ps.session_id) \
        .eq("recipient_role", "sender").order("created_at").execute().data
    assert [r["message_type"] for r in to_receiver] == ["join_request", "offer"]
    assert to_receiver[0]["payload"] == {"deviceName": "test"}
    assert to_receiver[1]["payload"] == OFFER
    assert [r["message_type"] for r in to_sender] == ["join_approved", "answer"]
    # neither side reads what it sent
    assert all(r["recipient_role"] == "receiver" for r in to_receiver)
    assert sc.table("signaling_messages").select("id").eq("recipient_role", "receiver").execute().data == []
    # select, order desc and limit as PostgREST parses them
    last = rc.table("signaling_messages").select("message_type,payload").eq("session_id", ps.session_id) \
        .order("created_at", desc=True).limit(1).execute().data
    assert last == [{"message_type": "offer", "payload": OFFER}]


def test_return_representation_fails_for_a_legitimate_sender_insert(stack, parties):
    # docs/contract.md: RETURNING makes Postgres check the SELECT policy on the new row → 42501
    ps, _, _ = parties
    r = rest(stack, ps.sender.access_token, "POST", "signaling_messages",
             json=row(ps.session_id, "sender", "receiver"), prefer="return=representation")
    assert r.status_code == 403
    assert r.json()["code"] == "42501"
    assert "row-level security" in r.json()["message"]
    # the same row with return=minimal is accepted, with an empty body
    r = rest(stack, ps.sender.access_token, "POST", "signaling_messages",
             json=row(ps.session_id, "sender", "receiver"), prefer="return=minimal")
    assert r.status_code == 201 and r.content == b""


def test_return_representation_fails_for_the_receiver_too(stack, parties):
    # the receiver cannot read the rows it addresses to the sender either
    ps, _, _ = parties
    r = rest(stack, ps.receiver.access_token, "POST", "signaling_messages",
             json=row(ps.session_id, "receiver", "sender", "answer"), prefer="return=representation")
    assert r.status_code == 403 and r.json()["code"] == "42501"


def test_wrong_role_is_refused(parties):
    ps, rc, sc = parties
    for c, bad in ((sc, row(ps.session_id, "receiver", "sender")),   # sender posing as receiver
                   (sc, row(ps.session_id, "sender", "sender")),
                   (rc, row(ps.session_id, "sender", "receiver"))):  # receiver posing as sender
        with pytest.raises(APIError) as e:
            c.table("signaling_messages").insert(bad, returning="minimal").execute()
        assert e.value.code == "42501"


def test_another_users_session_is_refused_and_invisible(stack, parties):
    ps, _, _ = parties
    oc, other = supabase_client(stack)
    with pytest.raises(APIError) as e:
        oc.table("signaling_messages").insert(row(ps.session_id, "sender", "receiver"), returning="minimal").execute()
    assert e.value.code == "42501"
    with pytest.raises(APIError) as e:
        oc.table("signaling_messages").insert(row(ps.session_id, "receiver", "sender"), returning="minimal").execute()
    assert e.value.code == "42501"
    assert oc.table("signaling_messages").select("*").eq("session_id", ps.session_id).execute().data == []
    assert oc.table("casting_sessions").select("*").eq("id", ps.session_id).execute().data == []


def test_sender_cannot_signal_before_approval_but_receiver_can(stack):
    rc, receiver = supabase_client(stack)
    sc, sender = supabase_client(stack)
    ps = paired_session(stack, approve=None, receiver=receiver, sender=sender)
    with pytest.raises(APIError) as e:
        sc.table("signaling_messages").insert(row(ps.session_id, "sender", "receiver"), returning="minimal").execute()
    assert e.value.code == "42501"  # sender_auth_expires_at is not set before approval (spec §6)
    rc.table("signaling_messages").insert(row(ps.session_id, "receiver", "sender", "answer"),
                                          returning="minimal").execute()


async def test_expired_authorization_refuses_inserts_but_reads_still_work(stack, parties):
    ps, _, sc = parties
    conn = await db(stack)
    try:
        await conn.execute("update public.casting_sessions set sender_auth_expires_at = now() - interval '1 second'"
                           " where id = $1", ps.session_id)
    finally:
        await conn.close()
    with pytest.raises(APIError) as e:
        sc.table("signaling_messages").insert(row(ps.session_id, "sender", "receiver"), returning="minimal").execute()
    assert e.value.code == "42501"
    # spec §10: you can still read the row and messages addressed to you
    got = sc.table("signaling_messages").select("message_type").eq("session_id", ps.session_id).execute().data
    assert got == [{"message_type": "join_approved"}]
    assert sc.table("casting_sessions").select("status").eq("id", ps.session_id).execute().data == \
        [{"status": "connecting"}]


def test_ended_session_refuses_both_sides_and_keeps_rows_readable(stack, parties):
    from castkit.devstack import api
    ps, rc, sc = parties
    assert api(stack, ps.receiver.access_token, "session-end", {"sessionId": ps.session_id}).status_code == 200
    for c, r in ((sc, row(ps.session_id, "sender", "receiver")), (rc, row(ps.session_id, "receiver", "sender"))):
        with pytest.raises(APIError) as e:
            c.table("signaling_messages").insert(r, returning="minimal").execute()
        assert e.value.code == "42501"
    got = sc.table("signaling_messages").select("message_type,payload").eq("session_id", ps.session_id) \
        .order("created_at").execute().data
    assert got[-1] == {"message_type": "disconnect", "payload": {"reason": "receiver_ended"}}


def test_payload_over_64_kib_is_54000_and_exactly_64_kib_passes(stack, parties):
    ps, _, sc = parties
    # jsonb prints {"sdp": "<n chars>"} as 11 + n bytes
    sc.table("signaling_messages").insert(row(ps.session_id, "sender", "receiver", "offer", {"sdp": "x" * 65525}),
                                          returning="minimal").execute()
    r = rest(stack, ps.sender.access_token, "POST", "signaling_messages", prefer="return=minimal",
             json=row(ps.session_id, "sender", "receiver", "offer", {"sdp": "x" * 65526}))
    assert r.status_code == 500
    assert r.json()["code"] == "54000"
    assert set(r.json()) == {"code", "message", "details", "hint"}


def test_rate_limit_counts_both_sides_and_answers_p0429(stack_factory):
    s = stack_factory(signaling_rate_limit=5)
    rc, receiver = supabase_client(s)
    sc, sender = supabase_client(s)
    ps = paired_session(s, receiver=receiver, sender=sender)  # join_request + join_approved = 2 rows
    sc.table("signaling_messages").insert(row(ps.session_id, "sender", "receiver"), returning="minimal").execute()
    rc.table("signaling_messages").insert(row(ps.session_id, "receiver", "sender", "answer"),
                                          returning="minimal").execute()
    sc.table("signaling_messages").insert(row(ps.session_id, "sender", "receiver"), returning="minimal").execute()
    for c, r in ((sc, row(ps.session_id, "sender", "receiver")), (rc, row(ps.session_id, "receiver", "sender"))):
        with pytest.raises(APIError) as e:
            c.table("signaling_messages").insert(r, returning="minimal").execute()
        assert e.value.code == "P0429"
    r = rest(s, ps.sender.access_token, "POST", "signaling_messages", prefer="return=minimal",
             json=row(ps.session_id, "sender", "receiver"))
    assert r.status_code == 500 and r.json()["code"] == "P0429"


def test_array_insert_and_malformed_bodies(stack, parties):
    ps, _, _ = parties
    t = ps.sender.access_token
    r = rest(stack, t, "POST", "signaling_messages", prefer="return=minimal",
             json=[row(ps.session_id, "sender", "receiver"), row(ps.session_id, "sender", "receiver", "ice_candidate",
                                                                 {"negotiationId": "n", "endOfCandidates": True})])
    assert r.status_code == 201
    got = rest(stack, ps.receiver.access_token, "GET", "signaling_messages",
               params={"select": "message_type", "session_id": f"eq.{ps.session_id}", "order": "created_at.asc"})
    assert [x["message_type"] for x in got.json()] == ["join_request", "offer", "ice_candidate"]
    r = rest(stack, t, "POST", "signaling_messages", content=b'{"session_id": ', prefer="return=minimal")
    assert r.status_code == 400 and r.json()["code"] == "PGRST102" and r.json()["message"] == "Empty or invalid json"
    r = rest(stack, t, "POST", "signaling_messages", content=b"", prefer="return=minimal")
    assert r.status_code == 400 and r.json()["code"] == "PGRST102"
    r = rest(stack, t, "POST", "signaling_messages", prefer="return=minimal",
             json=[row(ps.session_id, "sender", "receiver"), {"session_id": ps.session_id}])
    assert r.status_code == 400 and r.json()["code"] == "PGRST102"
    r = rest(stack, t, "POST", "signaling_messages", prefer="return=minimal", json={**row(ps.session_id, "sender", "receiver"), "bogus": 1})
    assert r.status_code == 400 and r.json()["code"] == "PGRST204"
    r = rest(stack, t, "GET", "signaling_messages", params={"session_id": "eq.not-a-uuid"})
    assert r.status_code == 400 and r.json()["code"] == "22P02"
    r = rest(stack, t, "GET", "nonexistent_table")
    assert r.status_code == 404 and r.json()["code"] == "PGRST205"


def test_missing_token_runs_as_anon(stack, parties):
    ps, _, _ = parties
    # only the apikey: role anon, which no policy admits
    r = rest(stack, None, "POST", "signaling_messages", prefer="return=minimal", json=row(ps.session_id, "sender", "receiver"))
    assert r.status_code == 401 and r.json()["code"] == "42501"
    r = rest(stack, None, "GET", "signaling_messages", params={"session_id": f"eq.{ps.session_id}"})
    assert r.status_code == 200 and r.json() == []
    r = rest(stack, None, "GET", "casting_sessions")
    assert r.status_code == 200 and r.json() == []


def test_no_apikey_is_refused_before_postgrest(stack, parties):
    import httpx
    ps, _, _ = parties
    r = httpx.get(f"{stack.supabase_url}/rest/v1/signaling_messages",
                  headers={"Authorization": f"Bearer {ps.sender.access_token}"})
    assert r.status_code == 401 and r.json()["message"] == "No API key found in request"


def test_invalid_and_expired_tokens(stack, stack_factory):
    r = rest(stack, "not.a.jwt", "GET", "signaling_messages")
    assert r.status_code == 401 and r.json()["code"] == "PGRST301"
    forged = jwt.encode({"sub": "00000000-0000-0000-0000-000000000001", "role": "authenticated",
                         "exp": int(time.time()) + 60}, "x" * 40, algorithm="HS256")
    r = rest(stack, forged, "GET", "signaling_messages")
    assert r.status_code == 401 and r.json()["code"] == "PGRST301"
    short = stack_factory(access_token_ttl=2)
    t = sign_in(short)
    exp = jwt.decode(t.access_token, options={"verify_signature": False})["exp"]
    assert rest(short, t.access_token, "GET", "signaling_messages").status_code == 200
    while time.time() <= exp + 0.05:
        time.sleep(0.1)
    r = rest(short, t.access_token, "GET", "signaling_messages")
    assert r.status_code == 401
    assert r.json()["code"] == "PGRST303" and r.json()["message"] == "JWT expired"
    from castkit.devstack import api
    r = api(short, t.access_token, "session-create", {})
    assert r.status_code == 401 and r.json() == {"error": {"code": "unauthorized", "message": "Token expired"}}


def test_clients_can_read_but_never_write_casting_sessions(stack, parties):
    ps, rc, sc = parties
    mine = sc.table("casting_sessions").select("id,status,receiver_user_id,sender_user_id").execute().data
    assert mine == [{"id": ps.session_id, "status": "connecting", "receiver_user_id": ps.receiver.user_id,
                     "sender_user_id": ps.sender.user_id}]
    assert rc.table("casting_sessions").select("id").execute().data == [{"id": ps.session_id}]
    r = rest(stack, ps.sender.access_token, "PATCH", "casting_sessions",
             params={"id": f"eq.{ps.session_id}"}, json={"status": "connected"})
    assert r.status_code == 403 and r.json()["code"] == "42501"
    r = rest(stack, ps.receiver.access_token, "POST", "casting_sessions", prefer="return=minimal",
             json={"receiver_user_id": ps.receiver.user_id, "expires_at": "2030-01-01T00:00:00Z"})
    assert r.status_code == 403 and r.json()["code"] == "42501"
    r = rest(stack, ps.receiver.access_token, "DELETE", "casting_sessions", params={"id": f"eq.{ps.session_id}"})
    assert r.status_code == 403 and r.json()["code"] == "42501"
    assert sc.table("casting_sessions").select("status").execute().data == [{"status": "connecting"}]


def test_official_client_bulk_insert_with_columns_and_exact_count(stack, parties):
    ps, rc, sc = parties
    # postgrest-py sends ?columns=… for a list: keys may differ, and a missing key inserts NULL
    sc.table("signaling_messages").insert([row(ps.session_id, "sender", "receiver"),
                                           row(ps.session_id, "sender", "receiver", "ice_candidate",
                                               {"negotiationId": "n", "candidate": "candidate:1 1 udp 1 127.0.0.1 9 typ host"})],
                                          returning="minimal").execute()
    res = rc.table("signaling_messages").select("id", count="exact").eq("session_id", ps.session_id).limit(2).execute()
    assert res.count == 3 and len(res.data) == 2
    r = rest(stack, ps.receiver.access_token, "GET", "signaling_messages", prefer="count=exact",
             params={"session_id": f"eq.{ps.session_id}", "limit": "2", "offset": "1"})
    assert r.headers["Content-Range"] == "1-2/3"
    r = rest(stack, ps.sender.access_token, "POST", "signaling_messages", prefer="return=minimal",
             params={"columns": "session_id,sender_role,recipient_role,message_type,payload"},
             json=[row(ps.session_id, "sender", "receiver"), {"session_id": ps.session_id, "sender_role": "sender",
                                                               "recipient_role": "receiver", "message_type": "offer"}])
    assert r.status_code == 400 and r.json()["code"] == "23502"  # payload NULL violates NOT NULL


def test_created_at_is_stamped_by_the_server(stack, parties):
    ps, rc, sc = parties
    sc.table("signaling_messages").insert({**row(ps.session_id, "sender", "receiver"),
                                           "created_at": "2000-01-01T00:00:00Z"}, returning="minimal").execute()
    got = rc.table("signaling_messages").select("created_at").eq("message_type", "offer") \
        .eq("session_id", ps.session_id).execute().data
    assert len(got) == 1 and not got[0]["created_at"].startswith("2000-")


def test_single_object_responses(parties):
    ps, _, sc = parties
    one = sc.table("casting_sessions").select("id,status").eq("id", ps.session_id).single().execute().data
    assert one == {"id": ps.session_id, "status": "connecting"}
    with pytest.raises(APIError) as e:
        sc.table("signaling_messages").select("id").eq("recipient_role", "receiver").single().execute()
    assert e.value.code == "PGRST116"
