"""The cleanup job (docs/contract.md, "Endpoints and the backend's rules"), on a stack with compressed time:
cleanup every 1 s, a 2 s pairing window, 2 s of heartbeat silence."""
import asyncio
import time
import uuid

import pytest

from castkit.devstack import api, db, paired_session, rest, sign_in

OPTS = dict(cleanup_interval=1, pairing_window=2, heartbeat_silence=2)


@pytest.fixture(scope="module")
def fast(stack_factory):
    return stack_factory(**OPTS)


async def wait_status(stack, sid, want, timeout=6.0):
    """Poll until the job has run (bounded: a few cleanup periods)."""
    conn = await db(stack)
    try:
        deadline = time.monotonic() + timeout
        while True:
            st = await conn.fetchval("select status from public.casting_sessions where id = $1", uuid.UUID(sid))
            if st == want or time.monotonic() > deadline:
                return st
            await asyncio.sleep(0.2)
    finally:
        await conn.close()


def rows_to_sender(stack, ps):
    return [r["message_type"] for r in rest(stack, ps.sender.access_token, "GET", "signaling_messages",
                                            params={"session_id": f"eq.{ps.session_id}"}).json()]


@pytest.mark.timeout(30)
async def test_waiting_and_unapproved_sessions_expire_after_the_pairing_window(fast):
    receiver = sign_in(fast)
    waiting = api(fast, receiver.access_token, "session-create", {}).json()
    ps = paired_session(fast, approve=None)  # status pairing, never approved
    assert await wait_status(fast, waiting["sessionId"], "expired") == "expired"
    assert await wait_status(fast, ps.session_id, "expired") == "expired"
    conn = await db(fast)
    try:
        n = await conn.fetchval("select count(*) from private.pairing_secrets where session_id = $1",
                                uuid.UUID(waiting["sessionId"]))
    finally:
        await conn.close()
    assert n == 0
    assert rows_to_sender(fast, ps) == []  # no disconnect row from the job


@pytest.mark.timeout(30)
async def test_connected_session_without_heartbeat_is_disconnected(fast):
    ps = paired_session(fast)
    assert api(fast, ps.sender.access_token, "session-update", {"sessionId": ps.session_id, "action": "connected"}).status_code == 200
    assert await wait_status(fast, ps.session_id, "disconnected") == "disconnected"
    assert rows_to_sender(fast, ps) == ["join_approved"]


@pytest.mark.timeout(30)
async def test_heartbeats_keep_a_connected_session_alive(fast):
    ps = paired_session(fast)
    assert api(fast, ps.sender.access_token, "session-update", {"sessionId": ps.session_id, "action": "connected"}).status_code == 200
    end = time.monotonic() + 4  # two silence limits, four cleanup runs
    while time.monotonic() < end:
        r = api(fast, ps.sender.access_token, "session-update", {"sessionId": ps.session_id, "action": "heartbeat"})
        assert r.status_code == 200 and r.json()["status"] == "connected"
        await asyncio.sleep(0.5)
    assert await wait_status(fast, ps.session_id, "connected", timeout=0) == "connected"


@pytest.mark.timeout(30)
async def test_expired_sender_authorization_is_disconnected(fast):
    ps = paired_session(fast)  # connecting
    conn = await db(fast)
    try:
        await conn.execute("update public.casting_sessions set sender_auth_expires_at = now() - interval '1 second'"
                           " where id = $1", uuid.UUID(ps.session_id))
    finally:
        await conn.close()
    assert await wait_status(fast, ps.session_id, "disconnected") == "disconnected"
    assert rows_to_sender(fast, ps) == ["join_approved"]
