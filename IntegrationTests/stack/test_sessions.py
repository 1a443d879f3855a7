"""session-update / session-end / ice-config (spec §8–§10, docs/contract.md)."""
import asyncio
import base64
import hashlib
import hmac
import time
import uuid

import pytest

from castkit.devstack import api, db, paired_session, rest, sign_in


def update(stack, token, sid, action):
    return api(stack, token, "session-update", {"sessionId": sid, "action": action})


async def fetch_session(stack, sid):
    conn = await db(stack)
    try:
        return await conn.fetchrow("select * from public.casting_sessions where id = $1", uuid.UUID(sid))
    finally:
        await conn.close()


async def age(stack, sid, sql):
    conn = await db(stack)
    try:
        await conn.execute(f"update public.casting_sessions set {sql} where id = $1", uuid.UUID(sid))
    finally:
        await conn.close()


async def test_connected_then_heartbeat_extends_to_two_hours(stack):
    ps = paired_session(stack)
    r = update(stack, ps.sender.access_token, ps.session_id, "connected")
    assert r.status_code == 200 and r.json()["status"] == "connected"
    row = await fetch_session(stack, ps.session_id)
    assert row["connected_at"] is not None and row["last_heartbeat_at"] == row["connected_at"]
    # make the authorization short, then a heartbeat brings it back to now + 2 h
    await age(stack, ps.session_id, "sender_auth_expires_at = now() + interval '1 minute'")
    r = update(stack, ps.sender.access_token, ps.session_id, "heartbeat")
    assert r.status_code == 200
    row = await fetch_session(stack, ps.session_id)
    assert (row["sender_auth_expires_at"] - row["last_heartbeat_at"]).total_seconds() == 7200
    assert r.json() == {"sessionId": ps.session_id, "status": "connected",
                        "senderAuthExpiresAt": row["sender_auth_expires_at"].strftime("%Y-%m-%dT%H:%M:%S.")
                        + f"{row['sender_auth_expires_at'].microsecond // 1000:03d}Z"}


async def test_heartbeat_is_capped_twelve_hours_after_connected_at(stack):
    ps = paired_session(stack)
    assert update(stack, ps.sender.access_token, ps.session_id, "connected").status_code == 200
    await age(stack, ps.session_id, "connected_at = now() - interval '11 hours 30 minutes'")
    assert update(stack, ps.sender.access_token, ps.session_id, "heartbeat").status_code == 200
    row = await fetch_session(stack, ps.session_id)
    assert (row["sender_auth_expires_at"] - row["connected_at"]).total_seconds() == 12 * 3600


async def test_cap_counts_from_created_at_before_connected(stack):
    ps = paired_session(stack)  # connecting, connected_at not set
    await age(stack, ps.session_id, "created_at = now() - interval '11 hours'")
    assert update(stack, ps.sender.access_token, ps.session_id, "heartbeat").status_code == 200
    row = await fetch_session(stack, ps.session_id)
    assert row["connected_at"] is None
    assert (row["sender_auth_expires_at"] - row["created_at"]).total_seconds() == 12 * 3600


@pytest.mark.timeout(40)
async def test_compressed_durations_heartbeat_then_cap_then_expiry(stack_factory):
    import asyncio
    s = stack_factory(sender_auth=4, sender_auth_cap=6)
    ps = paired_session(s)
    assert update(s, ps.sender.access_token, ps.session_id, "connected").status_code == 200
    r = update(s, ps.sender.access_token, ps.session_id, "heartbeat")
    row = await fetch_session(s, ps.session_id)
    assert (row["sender_auth_expires_at"] - row["last_heartbeat_at"]).total_seconds() == 4
    await asyncio.sleep(2.5)  # compressed time: past the point where now + 4 s exceeds the 6 s cap
    r = update(s, ps.sender.access_token, ps.session_id, "heartbeat")
    assert r.status_code == 200
    row = await fetch_session(s, ps.session_id)
    assert (row["sender_auth_expires_at"] - row["connected_at"]).total_seconds() == 6
    # wait out the cap: the sender's authorization is over
    while (await fetch_session(s, ps.session_id))["sender_auth_expires_at"].timestamp() > time.time() - 0.05:
        await asyncio.sleep(0.1)
    r = update(s, ps.sender.access_token, ps.session_id, "heartbeat")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    r = rest(s, ps.sender.access_token, "POST", "signaling_messages", prefer="return=minimal",
             json={"session_id": ps.session_id, "sender_role": "sender", "recipient_role": "receiver",
                   "message_type": "offer", "payload": {}})
    assert r.status_code == 403 and r.json()["code"] == "42501"


async def test_expired_authorization_is_404_for_every_action(stack):
    ps = paired_session(stack)
    await age(stack, ps.session_id, "sender_auth_expires_at = now() - interval '1 second'")
    for action in ("connected", "heartbeat", "end"):
        r = update(stack, ps.sender.access_token, ps.session_id, action)
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", action


def test_state_errors_and_strangers(stack):
    ps = paired_session(stack, approve=None)  # pairing
    r = update(stack, ps.sender.access_token, ps.session_id, "connected")
    assert r.status_code == 409 and r.json()["error"]["code"] == "invalid_state"
    r = update(stack, sign_in(stack).access_token, ps.session_id, "heartbeat")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    r = update(stack, ps.sender.access_token, ps.session_id, "pause")
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request"
    r = update(stack, ps.sender.access_token, str(uuid.uuid4()), "end")
    assert r.status_code == 404


def test_sender_end_disconnects_without_a_backend_row(stack):
    ps = paired_session(stack)
    assert update(stack, ps.sender.access_token, ps.session_id, "connected").status_code == 200
    r = update(stack, ps.sender.access_token, ps.session_id, "end")
    assert r.status_code == 200 and r.json()["status"] == "disconnected"
    r = update(stack, ps.sender.access_token, ps.session_id, "connected")
    assert r.status_code == 409 and r.json()["error"]["code"] == "invalid_state"
    r = update(stack, ps.sender.access_token, ps.session_id, "end")
    assert r.status_code == 409
    got = rest(stack, ps.receiver.access_token, "GET", "signaling_messages",
               params={"select": "message_type", "session_id": f"eq.{ps.session_id}"}).json()
    assert got == [{"message_type": "join_request"}]  # the sender inserts its own disconnect row


def test_receiver_end_sends_receiver_ended(stack):
    ps = paired_session(stack)
    r = api(stack, ps.sender.access_token, "session-end", {"sessionId": ps.session_id})
    assert r.status_code == 404  # the sender uses session-update
    r = api(stack, ps.receiver.access_token, "session-end", {"sessionId": ps.session_id})
    assert r.status_code == 200 and r.json() == {"sessionId": ps.session_id, "status": "disconnected"}
    got = rest(stack, ps.sender.access_token, "GET", "signaling_messages",
               params={"select": "message_type,payload,sender_role", "session_id": f"eq.{ps.session_id}",
                       "order": "created_at.asc"}).json()
    assert got[-1] == {"message_type": "disconnect", "payload": {"reason": "receiver_ended"}, "sender_role": "receiver"}
    r = api(stack, ps.receiver.access_token, "session-end", {"sessionId": ps.session_id})
    assert r.status_code == 409


def test_receiver_can_end_a_waiting_session(stack):
    receiver = sign_in(stack)
    c = api(stack, receiver.access_token, "session-create", {}).json()
    r = api(stack, receiver.access_token, "session-end", {"sessionId": c["sessionId"]})
    assert r.status_code == 200
    r = api(stack, sign_in(stack).access_token, "session-pair", {"pin": c["pin"]})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_code"


def test_ice_config_points_at_the_local_stun_responder(stack):
    r = api(stack, sign_in(stack).access_token, "ice-config")
    assert r.status_code == 200
    assert r.json() == {"iceServers": [{"urls": [f"stun:127.0.0.1:{stack.stun_port}"]}], "turnConfigured": False}
    assert stack.stun == f"stun:127.0.0.1:{stack.stun_port}"


def test_ice_config_with_turn_gives_turn_rest_credentials(stack_factory):
    s = stack_factory(turn="turn:127.0.0.1:3478?transport=udp", turn_secret="shared-secret-for-tests")
    t = sign_in(s)
    before = int(time.time())
    r = api(s, t.access_token, "ice-config")
    assert r.status_code == 200
    b = r.json()
    assert b["turnConfigured"] is True and len(b["iceServers"]) == 2
    turn = b["iceServers"][1]
    assert turn["urls"] == ["turn:127.0.0.1:3478?transport=udp"]
    expiry, uid = turn["username"].split(":", 1)
    assert uid == t.user_id
    assert before + 86400 <= int(expiry) <= int(time.time()) + 86400
    want = base64.b64encode(hmac.new(b"shared-secret-for-tests", turn["username"].encode(), hashlib.sha1).digest()).decode()
    assert turn["credential"] == want


def test_unknown_api_endpoint_and_method_keep_the_error_shape(stack):
    t = sign_in(stack)
    r = api(stack, t.access_token, "session-teleport", {})
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    r = api(stack, t.access_token, "session-create", method="GET")
    assert r.status_code == 405 and r.json()["error"]["code"] == "method_not_allowed"


async def test_session_end_waits_for_a_sender_insert_instead_of_deadlocking_with_it(stack):
    """A signaling insert takes the limits trigger's advisory lock, then (its foreign-key check)
    a KEY SHARE lock on the session row. session-end inserts the disconnect row after locking the
    session: it must take the two in the same order, or an insert of the sender's in flight and
    session-end deadlock and Postgres aborts one (a 500 seen in CI while castd was sending rows)."""
    ps = paired_session(stack)
    sid = uuid.UUID(ps.session_id)
    conn, watch = await db(stack), await db(stack)
    try:
        tx = conn.transaction()
        await tx.start()
        # The insert's first step: the trigger's advisory lock (0005_settings_and_limits.sql).
        await conn.execute("select private.lock_session_inserts($1)", sid)
        end = asyncio.create_task(asyncio.to_thread(
            api, stack, ps.receiver.access_token, "session-end", {"sessionId": ps.session_id}))
        # session-end now waits for that advisory lock (whatever it holds already).
        for _ in range(500):
            if await watch.fetchval("select count(*) from pg_locks where locktype = 'advisory' and not granted"):
                break
            await asyncio.sleep(0.01)
        else:
            pytest.fail("session-end never waited for the insert's lock")
        # The insert's second step: the foreign-key check's KEY SHARE on the session row. Had
        # session-end locked the row FOR UPDATE first, this would close a cycle (deadlock).
        await conn.execute("set local lock_timeout = '5s'")
        assert await conn.fetchval("select 1 from public.casting_sessions where id = $1 for key share", sid) == 1
        await tx.commit()
        r = await asyncio.wait_for(end, 20)
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "disconnected"
    finally:
        await conn.close()
        await watch.close()
