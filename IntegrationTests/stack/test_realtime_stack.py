"""Realtime (docs/contract.md, wire C) against the running local stack.

Two kinds of client: the official ``supabase`` Python client (what real
clients speak), and raw ``websockets`` frames (exact envelopes, both vsn).
Every change reaches a subscriber only if Postgres RLS lets that subscriber
read the row; the tests prove the "nothing else arrived" half with a
sentinel: events reach one socket in commit order, so once a later event has
arrived, an earlier one that was going to arrive would have.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
import uuid

import httpx
import pytest
import websockets

pytestmark = pytest.mark.asyncio

WAIT = 10.0  # upper bound on any single expected message


# ---- the stack -------------------------------------------------------------


def _info(stack) -> dict:
    """The KEY=value lines of `Scripts/devstack up` from the fixture."""
    for attr in ("env", "vars", "info"):
        v = getattr(stack, attr, None)
        if isinstance(v, dict):
            return v
    if isinstance(stack, dict):
        return stack
    raise AssertionError(f"cannot read the stack's URLs from {stack!r}")


class Stack:
    def __init__(self, stack):
        env = _info(stack)
        self.api = env["CASTD_API_URL"].rstrip("/")
        self.supabase = env["CASTD_SUPABASE_URL"].rstrip("/")
        self.key = env["CASTD_SUPABASE_KEY"]
        self.pg_url = env.get("DEVSTACK_PG_URL")

    def ws_url(self, vsn: str | None = "1.0.0", apikey: str | None = None) -> str:
        base = self.supabase.replace("http://", "ws://").replace("https://", "wss://")
        q = f"apikey={apikey or self.key}"
        if vsn:
            q += f"&vsn={vsn}"
        return f"{base}/realtime/v1/websocket?{q}"


class User:
    def __init__(self, st: Stack, http: httpx.AsyncClient, body: dict):
        self.st, self.http = st, http
        self.id = body["user"]["id"]
        self.token = body["access_token"]
        self.refresh_token = body["refresh_token"]

    def headers(self) -> dict:
        return {"apikey": self.st.key, "Authorization": f"Bearer {self.token}"}

    async def api(self, name: str, body: dict) -> dict:
        r = await self.http.post(f"{self.st.api}/api/public/{name}", json=body, headers=self.headers())
        assert r.status_code == 200, (name, r.status_code, r.text)
        return r.json()

    async def insert(self, session_id: str, sender_role: str, recipient_role: str, message_type: str, payload: dict) -> None:
        r = await self.http.post(
            f"{self.st.supabase}/rest/v1/signaling_messages",
            json={"session_id": session_id, "sender_role": sender_role, "recipient_role": recipient_role,
                  "message_type": message_type, "payload": payload},
            headers={**self.headers(), "Prefer": "return=minimal"})
        assert r.status_code == 201, (r.status_code, r.text)

    async def refresh(self) -> None:
        r = await self.http.post(f"{self.st.supabase}/auth/v1/token?grant_type=refresh_token",
                                 json={"refresh_token": self.refresh_token}, headers={"apikey": self.st.key})
        assert r.status_code == 200, r.text
        body = r.json()
        self.token, self.refresh_token = body["access_token"], body["refresh_token"]


async def signup(st: Stack, http: httpx.AsyncClient) -> User:
    r = await http.post(f"{st.supabase}/auth/v1/signup", json={"data": {}},
                        headers={"apikey": st.key, "Authorization": f"Bearer {st.key}"})
    assert r.status_code == 200, r.text
    return User(st, http, r.json())


async def paired(st: Stack, http: httpx.AsyncClient, approve: bool = False) -> tuple[User, User, str]:
    """A receiver's session with a sender paired by PIN (status pairing, or connecting)."""
    receiver, sender = await signup(st, http), await signup(st, http)
    created = await receiver.api("session-create", {})
    pairing = await sender.api("session-pair", {"pin": created["pin"], "deviceName": "realtime test"})
    assert pairing["status"] == "pairing"
    if approve:
        await receiver.api("session-approve", {"sessionId": created["sessionId"], "approve": True})
    return receiver, sender, created["sessionId"]


def subs_for(session_id: str) -> list[dict]:
    # spec §5: what the sender subscribes to.
    return [{"event": "UPDATE", "schema": "public", "table": "casting_sessions", "filter": f"id=eq.{session_id}"},
            {"event": "INSERT", "schema": "public", "table": "signaling_messages", "filter": f"session_id=eq.{session_id}"}]


# ---- raw Phoenix client ----------------------------------------------------


class Raw:
    """A bare Phoenix socket speaking vsn 1.0.0 objects or vsn 2.0.0 arrays."""

    def __init__(self, ws, vsn: str):
        self.ws, self.vsn, self.ref = ws, vsn, 0

    @classmethod
    async def open(cls, st: Stack, vsn: str = "1.0.0") -> "Raw":
        return cls(await websockets.connect(st.ws_url(vsn), max_size=None), vsn)

    async def close(self) -> None:
        await self.ws.close()

    async def send(self, topic: str, event: str, payload: dict, join_ref: str | None = None) -> str:
        self.ref += 1
        ref = str(self.ref)
        if self.vsn == "2.0.0":
            await self.ws.send(json.dumps([join_ref, ref, topic, event, payload]))
        else:
            await self.ws.send(json.dumps({"topic": topic, "event": event, "payload": payload, "ref": ref, "join_ref": join_ref}))
        return ref

    async def recv_raw(self, timeout: float = WAIT):
        return json.loads(await asyncio.wait_for(self.ws.recv(), timeout))

    async def recv(self, timeout: float = WAIT) -> dict:
        """Normalised to {join_ref?, ref, topic, event, payload}."""
        m = await self.recv_raw(timeout)
        if self.vsn == "2.0.0":
            assert isinstance(m, list) and len(m) == 5, m
            return {"join_ref": m[0], "ref": m[1], "topic": m[2], "event": m[3], "payload": m[4]}
        assert isinstance(m, dict) and set(m) == {"topic", "event", "payload", "ref"}, m
        return m

    async def join(self, topic: str, subs: list[dict], token: str | None) -> tuple[str, dict, dict]:
        payload = {"config": {"broadcast": {"ack": False, "self": False}, "presence": {"key": "", "enabled": False},
                              "postgres_changes": subs, "private": False}}
        if token is not None:
            payload["access_token"] = token
        self.ref += 1
        ref = str(self.ref)
        if self.vsn == "2.0.0":
            await self.ws.send(json.dumps([ref, ref, topic, "phx_join", payload]))
        else:
            await self.ws.send(json.dumps({"topic": topic, "event": "phx_join", "payload": payload, "ref": ref, "join_ref": ref}))
        reply = await self.recv()
        assert reply["event"] == "phx_reply" and reply["ref"] == ref, reply
        if reply["payload"]["status"] != "ok":
            return ref, reply, {}
        system = await self.recv()
        return ref, reply, system

    async def next_change(self, timeout: float = WAIT) -> dict:
        """The next change, past late announcements of the setup (see is_setup)."""
        while True:
            m = await self.recv(timeout)
            assert m["event"] == "postgres_changes", m
            if not is_setup(m["payload"]):
                return m


def is_setup(change: dict) -> bool:
    """Rows written by the pairing/approval before a test subscribed. Their
    NOTIFY can reach the gateway a moment after the join (the listening
    backend is scheduled independently of the committing one), and then a
    subscriber that may read them rightly receives them, as it would from
    Supabase. Tests skip them only at the head of a stream."""
    data = change["data"]
    rec = data["record"]
    if data["table"] == "casting_sessions":
        return data["type"] == "UPDATE" and rec.get("status") in ("pairing", "connecting")
    return rec.get("message_type") in ("join_request", "join_approved")


# ---- fixtures ----------------------------------------------------------------


@pytest.fixture
def st(stack) -> Stack:
    """The session's stack (conftest's `stack`): its URLs and key."""
    return Stack(stack)


@pytest.fixture
async def http():
    """The HTTP client the test's users speak through, closed after the test."""
    async with httpx.AsyncClient(timeout=WAIT) as client:
        yield client


@pytest.fixture
async def approved(st, http) -> tuple[User, User, str]:
    """(receiver, sender, session id): a session paired by PIN and approved (status connecting)."""
    return await paired(st, http, approve=True)


@pytest.fixture
async def open_socket():
    """open_socket(st, vsn="1.0.0"): a raw Phoenix socket on that stack, closed after the test."""
    opened: list[Raw] = []

    async def open_(st: Stack, vsn: str = "1.0.0") -> Raw:
        sock = await Raw.open(st, vsn)
        opened.append(sock)
        return sock

    yield open_
    for sock in opened:
        await sock.close()


# ---- the official client ---------------------------------------------------


async def test_official_client_receives_exactly_the_rows_rls_allows(st, http):
    from supabase import acreate_client

    receiver, sender, sid = await paired(st, http)
    # Another session between two other users: its rows are invisible to
    # our sender and receiver even without a filter.
    other_receiver, other_sender, other_sid = await paired(st, http)
    stranger = await signup(st, http)

    got: dict[str, list] = {"receiver": [], "sender": [], "sender_all": [], "stranger": []}
    events: dict[str, asyncio.Event] = {k: asyncio.Event() for k in got}
    clients = []

    async def subscribe(name: str, user: User, specs: list[dict]):
        client = await acreate_client(st.supabase, st.key)
        clients.append(client)
        await client.realtime.set_auth(user.token)
        channel = client.channel(f"test-{name}-{uuid.uuid4().hex[:6]}")
        for spec in specs:
            def cb(payload, name=name):
                got[name].append(payload)
                events[name].set()
            channel.on_postgres_changes(event=spec["event"], schema="public", table=spec["table"],
                                        filter=spec.get("filter"), callback=cb)
        states = []
        await channel.subscribe(lambda state, err: states.append((str(state), err)))
        assert states and states[-1][0].endswith("SUBSCRIBED"), states
        return channel

    try:
        await subscribe("receiver", receiver, subs_for(sid))
        await subscribe("sender", sender, subs_for(sid))
        await subscribe("sender_all", sender, [{"event": "INSERT", "table": "signaling_messages"}])
        await subscribe("stranger", stranger, [{"event": "*", "table": "signaling_messages"},
                                               {"event": "*", "table": "casting_sessions"}])

        await receiver.api("session-approve", {"sessionId": sid, "approve": True})
        await other_receiver.api("session-approve", {"sessionId": other_sid, "approve": True})
        await sender.insert(sid, "sender", "receiver", "offer", {"type": "offer", "sdp": "v=0", "negotiationId": "n1"})
        await other_sender.insert(other_sid, "sender", "receiver", "offer", {"type": "offer", "sdp": "v=0", "negotiationId": "n2"})
        await other_receiver.insert(other_sid, "receiver", "sender", "answer", {"type": "answer", "sdp": "other", "negotiationId": "n2"})
        await receiver.insert(sid, "receiver", "sender", "answer", {"type": "answer", "sdp": "v=0 a", "negotiationId": "n1"})
        # The stranger's sentinel: its own session row appears only to it.
        await stranger.api("session-create", {})

        async def until(name: str, pred):
            deadline = time.monotonic() + WAIT
            while not pred(got[name]):
                events[name].clear()
                left = deadline - time.monotonic()
                assert left > 0, (name, got[name])
                try:
                    await asyncio.wait_for(events[name].wait(), left)
                except asyncio.TimeoutError:
                    pass

        def last_is(kind):
            return lambda rows: bool(rows) and rows[-1]["data"]["record"].get("message_type") == kind
        await until("sender", last_is("answer"))
        await until("sender_all", last_is("answer"))
        await until("receiver", last_is("offer"))
        await until("stranger", lambda rows: any(r["data"]["table"] == "casting_sessions" for r in rows))

        def summary(rows):
            # Only the pairing (before subscribing) may be announced late.
            while rows and rows[0]["data"]["table"] == "casting_sessions" and rows[0]["data"]["record"]["status"] == "pairing" \
                    or rows and rows[0]["data"]["record"].get("message_type") == "join_request":
                rows = rows[1:]
            return [(r["data"]["type"], r["data"]["table"],
                     r["data"]["record"].get("message_type") or r["data"]["record"].get("status"),
                     r["data"]["record"].get("session_id") or r["data"]["record"]["id"]) for r in rows]

        # The sender: the approval (UPDATE), join_approved and the answer, all of its session.
        assert summary(got["sender"]) == [("UPDATE", "casting_sessions", "connecting", sid),
                                          ("INSERT", "signaling_messages", "join_approved", sid),
                                          ("INSERT", "signaling_messages", "answer", sid)]
        # Unfiltered, still only rows addressed to this sender of this session.
        assert summary(got["sender_all"]) == [("INSERT", "signaling_messages", "join_approved", sid),
                                              ("INSERT", "signaling_messages", "answer", sid)]
        # The receiver: the same UPDATE and the sender's offer; never the rows it sent nor join_approved.
        assert summary(got["receiver"]) == [("UPDATE", "casting_sessions", "connecting", sid),
                                            ("INSERT", "signaling_messages", "offer", sid)]
        # The stranger: nothing of either session, only its own new session.
        assert [(r["data"]["type"], r["data"]["table"]) for r in got["stranger"]] == [("INSERT", "casting_sessions")]
        assert got["stranger"][0]["data"]["record"]["receiver_user_id"] == stranger.id

        upd = got["sender"][0]["data"]
        assert upd["old_record"] == {"id": sid}
        assert {"name": "status", "type": "text"} in upd["columns"]
        assert upd["record"]["sender_user_id"] == sender.id
        answer = got["sender"][2]["data"]
        assert answer["record"]["payload"] == {"type": "answer", "sdp": "v=0 a", "negotiationId": "n1"}
        assert "old_record" not in answer and answer["errors"] is None
        assert answer["commit_timestamp"].endswith("Z") and answer["commit_timestamp"][10] == "T"
    finally:
        for c in clients:
            await c.realtime.close()


def _exp(token: str) -> int:
    import jwt
    return jwt.decode(token, options={"verify_signature": False})["exp"]


@pytest.mark.timeout(45)
async def test_official_client_refresh_moves_the_expiry_and_expiry_closes_the_channel(stack_factory, http):
    from supabase import AsyncClientOptions, acreate_client

    ttl = 4
    st = Stack(stack_factory(access_token_ttl=ttl))
    client = await acreate_client(st.supabase, st.key, AsyncClientOptions(auto_refresh_token=False))
    try:
        signed = await client.auth.sign_in_anonymously()
        token = signed.session.access_token
        receiver = await signup(st, http)
        created = await receiver.api("session-create", {})
        r = await http.post(f"{st.api}/api/public/session-pair", json={"pin": created["pin"]},
                            headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200, r.text
        sid = created["sessionId"]
        await receiver.api("session-approve", {"sessionId": sid, "approve": True})

        rows, systems, states, errors = [], [], [], []
        arrived = asyncio.Event()
        await client.realtime.set_auth(token)
        channel = client.channel("refresh-" + uuid.uuid4().hex[:6])
        channel.on_postgres_changes(event="INSERT", schema="public", table="signaling_messages",
                                    filter=f"session_id=eq.{sid}",
                                    callback=lambda p: (rows.append(p), arrived.set()))
        channel.on_system(lambda p: (systems.append(p), arrived.set()))

        async def until(pred):
            deadline = time.monotonic() + ttl + WAIT
            while not pred():
                arrived.clear()
                assert time.monotonic() < deadline, (rows, systems, states)
                try:
                    await asyncio.wait_for(arrived.wait(), 1.0)
                except asyncio.TimeoutError:
                    pass

        await channel.subscribe(lambda state, err: (states.append(str(state)), errors.append(err), arrived.set()))
        assert states[-1].endswith("SUBSCRIBED")
        await until(lambda: systems)  # the system push follows the join reply
        assert [(p.extension, p.status, p.message) for p in systems] == [("postgres_changes", "ok", "Subscribed to PostgreSQL")]

        first_exp = _exp(token)
        await asyncio.sleep(2.0)  # let time pass, so the refreshed token outlives the first by 2 s
        refreshed = await client.auth.refresh_session()
        new_token = refreshed.session.access_token
        assert _exp(new_token) >= first_exp + 2
        await client.realtime.set_auth(new_token)  # what the auth listener does, awaited here

        # Past the first token's expiry the channel still delivers.
        await asyncio.sleep(max(0.0, first_exp + 0.5 - time.time()))
        assert time.time() < _exp(new_token)
        await receiver.refresh()
        await receiver.insert(sid, "receiver", "sender", "answer", {"sdp": "after the first expiry"})

        await until(lambda: any(p["data"]["record"]["payload"] == {"sdp": "after the first expiry"} for p in rows))
        assert not any("CLOSED" in s for s in states)

        # The refreshed token expires too: a system error (the client
        # reports CHANNEL_ERROR with it), then phx_close (CLOSED).
        await until(lambda: any("CLOSED" in s for s in states))
        assert time.time() >= _exp(new_token) - 1
        assert [s.rsplit(".", 1)[-1] for s in states] == ["SUBSCRIBED", "CHANNEL_ERROR", "CLOSED"]
        err = json.loads(str(errors[1]))
        assert (err["extension"], err["status"]) == ("system", "error")
        assert err["message"].startswith("Token has expired")
    finally:
        await client.realtime.close()


# ---- raw protocol ----------------------------------------------------------


@pytest.mark.parametrize("vsn", ["1.0.0", "2.0.0"])
async def test_raw_join_reply_system_push_and_change_envelopes(st, approved, open_socket, vsn):
    receiver, sender, sid = approved
    sock = await open_socket(st, vsn)
    ref, reply, system = await sock.join("realtime:castd-" + sid, subs_for(sid), sender.token)
    pcs = reply["payload"]["response"]["postgres_changes"]
    assert reply["payload"]["status"] == "ok"
    assert [(p["event"], p["schema"], p["table"], p["filter"]) for p in pcs] == \
        [(s["event"], s["schema"], s["table"], s["filter"]) for s in subs_for(sid)]
    assert all(type(p["id"]) is int for p in pcs)
    if vsn == "2.0.0":
        assert reply["join_ref"] == ref
    assert system == ({"join_ref": None, "ref": None} if vsn == "2.0.0" else {"ref": None}) | {
        "topic": "realtime:castd-" + sid, "event": "system",
        "payload": {"extension": "postgres_changes", "status": "ok",
                    "message": "Subscribed to PostgreSQL", "channel": "castd-" + sid}}

    await receiver.insert(sid, "receiver", "sender", "answer", {"type": "answer", "sdp": "x", "negotiationId": "n"})
    while True:
        raw = await sock.recv_raw()
        if not is_setup((raw[4] if vsn == "2.0.0" else raw["payload"])):
            break
    if vsn == "2.0.0":
        assert raw[:4] == [None, None, "realtime:castd-" + sid, "postgres_changes"]
        push = raw[4]
    else:
        assert (raw["topic"], raw["event"], raw["ref"]) == ("realtime:castd-" + sid, "postgres_changes", None)
        push = raw["payload"]
    assert push["ids"] == [pcs[1]["id"]]
    data = push["data"]
    assert (data["schema"], data["table"], data["type"], data["errors"]) == ("public", "signaling_messages", "INSERT", None)
    assert [c["name"] for c in data["columns"]] == list(data["record"])  # column order, as PostgREST
    types = {c["name"]: c["type"] for c in data["columns"]}
    assert (types["id"], types["payload"], types["created_at"]) == ("uuid", "jsonb", "timestamptz")
    rec = data["record"]
    assert rec["session_id"] == sid and rec["recipient_role"] == "sender" and rec["message_type"] == "answer"
    assert rec["payload"] == {"type": "answer", "sdp": "x", "negotiationId": "n"}
    uuid.UUID(rec["id"])
    assert rec["created_at"][10] == "T" and rec["created_at"][-6:] == "+00:00"


@pytest.mark.parametrize("vsn", ["1.0.0", "2.0.0"])
async def test_raw_heartbeat_unmatched_topic_and_leave(st, http, open_socket, vsn):
    sender = await signup(st, http)
    sock = await open_socket(st, vsn)
    ref = await sock.send("phoenix", "heartbeat", {})
    m = await sock.recv()
    assert (m["topic"], m["event"], m["ref"], m["payload"]) == ("phoenix", "phx_reply", ref, {"status": "ok", "response": {}})

    ref = await sock.send("realtime:never-joined", "access_token", {"access_token": sender.token})
    m = await sock.recv()
    assert (m["topic"], m["event"], m["ref"]) == ("realtime:never-joined", "phx_reply", ref)
    assert m["payload"] == {"status": "error", "response": {"reason": "unmatched topic"}}

    join_ref, reply, _ = await sock.join("realtime:leave-me", [], sender.token)
    assert reply["payload"] == {"status": "ok", "response": {"postgres_changes": []}}
    ref = await sock.send("realtime:leave-me", "phx_leave", {}, join_ref)
    m = await sock.recv()
    assert (m["event"], m["ref"], m["payload"]) == ("phx_reply", ref, {"status": "ok", "response": {}})
    m = await sock.recv()
    assert (m["topic"], m["event"], m["ref"], m["payload"]) == ("realtime:leave-me", "phx_close", join_ref, {})

    # Left means gone: a push to it is unmatched again.
    ref = await sock.send("realtime:leave-me", "access_token", {"access_token": sender.token}, join_ref)
    m = await sock.recv()
    assert m["payload"]["response"] == {"reason": "unmatched topic"}


async def test_raw_default_vsn_is_1_0_0_and_wrong_apikey_is_refused(st):
    async with websockets.connect(st.ws_url(vsn=None)) as ws:
        await ws.send('{"topic":"phoenix","event":"heartbeat","payload":{},"ref":"1"}')
        assert json.loads(await asyncio.wait_for(ws.recv(), WAIT)) == \
            {"topic": "phoenix", "event": "phx_reply", "payload": {"status": "ok", "response": {}}, "ref": "1"}
    with pytest.raises(websockets.exceptions.InvalidStatus) as e:
        await websockets.connect(st.ws_url(apikey="not-the-key"))
    assert e.value.response.status_code == 401


async def test_raw_join_with_a_bad_token_is_refused(st, open_socket):
    sock = await open_socket(st)
    _, reply, _ = await sock.join("realtime:bad", [], "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.forged")
    assert reply["payload"]["status"] == "error"
    assert reply["payload"]["response"]["reason"].startswith("InvalidJWTToken")


async def test_a_60_kb_payload_row_arrives_whole(st, approved, open_socket):
    # NOTIFY stops at 8000 bytes: this row only arrives if the server notifies
    # keys and reads the row itself.
    receiver, sender, sid = approved
    sock = await open_socket(st, "2.0.0")
    await sock.join("realtime:big", subs_for(sid), sender.token)
    sdp = "".join(chr(ord("a") + i % 26) for i in range(60 * 1024))
    await receiver.insert(sid, "receiver", "sender", "answer", {"type": "answer", "sdp": sdp, "negotiationId": "big"})
    m = await sock.next_change()
    assert m["payload"]["data"]["record"]["payload"] == {"type": "answer", "sdp": sdp, "negotiationId": "big"}


async def test_access_token_refresh_keeps_the_channel_and_a_bad_one_closes_it(st, approved, open_socket):
    receiver, sender, sid = approved
    sock = await open_socket(st)
    topic = "realtime:refresh"
    join_ref, _, _ = await sock.join(topic, subs_for(sid), sender.token)
    await sender.refresh()
    await sock.send(topic, "access_token", {"access_token": sender.token}, join_ref)
    await receiver.insert(sid, "receiver", "sender", "answer", {"sdp": "after refresh"})
    m = await sock.next_change()  # no reply to access_token comes first
    assert m["payload"]["data"]["record"]["payload"] == {"sdp": "after refresh"}

    await sock.send(topic, "access_token", {"access_token": "not.a.jwt"}, join_ref)
    m = await sock.recv()
    assert (m["event"], m["payload"]["extension"], m["payload"]["status"], m["payload"]["channel"]) == \
        ("system", "system", "error", "refresh")
    assert "not.a.jwt" not in json.dumps(m)
    m = await sock.recv()
    assert (m["topic"], m["event"], m["ref"]) == (topic, "phx_close", join_ref)
    # The socket survives: a heartbeat is still answered.
    ref = await sock.send("phoenix", "heartbeat", {})
    assert (await sock.recv())["ref"] == ref


async def test_malformed_frames_do_not_hurt_the_socket_or_other_clients(st, approved, open_socket):
    receiver, sender, sid = approved
    good = await open_socket(st, "2.0.0")
    bad = await open_socket(st, "2.0.0")
    await good.join("realtime:good", subs_for(sid), sender.token)
    await bad.ws.send("{definitely not json")
    await bad.ws.send(b"\x00\x01binary")
    await bad.ws.send('["1","2","realtime:x","phx_join","not an object"]')
    m = await bad.recv()
    assert m["ref"] == "2" and m["payload"]["status"] == "error"
    assert m["payload"]["response"]["reason"] == "malformed message: payload must be an object"
    ref = await bad.send("phoenix", "heartbeat", {})
    assert (await bad.recv())["ref"] == ref
    await receiver.insert(sid, "receiver", "sender", "answer", {"sdp": "still flowing"})
    assert (await good.next_change())["payload"]["data"]["record"]["payload"] == {"sdp": "still flowing"}


async def test_client_disconnect_without_leave_does_not_disturb_others(st, approved, open_socket):
    receiver, sender, sid = approved
    gone = await Raw.open(st)
    await gone.join("realtime:gone", subs_for(sid), sender.token)
    gone.ws.transport.abort()  # vanish: no phx_leave, no close frame
    stay = await open_socket(st)
    await stay.join("realtime:stay", subs_for(sid), sender.token)
    await receiver.insert(sid, "receiver", "sender", "answer", {"sdp": "one"})
    assert (await stay.next_change())["payload"]["data"]["record"]["payload"] == {"sdp": "one"}


# ---- time and faults (stacks of their own) -----------------------------------


@pytest.mark.timeout(40)
async def test_token_expiry_closes_the_channel_and_an_expired_token_cannot_join(stack_factory, http, open_socket):
    ttl = 3
    st = Stack(stack_factory(access_token_ttl=ttl))
    user = await signup(st, http)
    joined_at = time.time()
    sock = await open_socket(st, "2.0.0")
    join_ref, reply, _ = await sock.join("realtime:short", [], user.token)
    assert reply["payload"]["status"] == "ok"
    m = await sock.recv(timeout=ttl + WAIT)
    assert (m["join_ref"], m["ref"], m["topic"], m["event"]) == (None, None, "realtime:short", "system")
    assert (m["payload"]["extension"], m["payload"]["status"], m["payload"]["channel"]) == ("system", "error", "short")
    assert m["payload"]["message"].startswith("Token has expired")
    assert time.time() - joined_at >= ttl - 2  # not at once: only at the token's exp (whole seconds)
    m = await sock.recv()
    assert (m["join_ref"], m["ref"], m["topic"], m["event"], m["payload"]) == \
        (join_ref, join_ref, "realtime:short", "phx_close", {})
    # The socket outlives the channel; the expired token no longer joins.
    _, reply, _ = await sock.join("realtime:short", [], user.token)
    assert reply["payload"] == {"status": "error", "response": {"reason": "InvalidJWTToken: Token has expired"}}


@pytest.mark.timeout(40)
async def test_a_socket_silent_past_the_idle_timeout_is_closed(stack_factory, open_socket):
    st = Stack(stack_factory(realtime_idle_timeout=2))
    talker = await open_socket(st)
    silent = await open_socket(st)
    opened = time.monotonic()
    for _ in range(4):  # a heartbeat every second keeps a socket open
        ref = await talker.send("phoenix", "heartbeat", {})
        assert (await talker.recv())["ref"] == ref
        await asyncio.sleep(1.0)
    with pytest.raises(websockets.exceptions.ConnectionClosed):
        await asyncio.wait_for(silent.ws.recv(), WAIT)
    assert silent.ws.close_code == 1000
    assert 1.5 <= time.monotonic() - opened
    ref = await talker.send("phoenix", "heartbeat", {})
    assert (await talker.recv())["ref"] == ref


@pytest.mark.timeout(60)
async def test_changes_flow_again_after_postgres_restarts(stack_factory, http, open_socket):
    import asyncpg

    stk = stack_factory(pairing_window=298)
    st = Stack(stk)
    receiver, sender, sid = await paired(st, http, approve=True)
    sock = await open_socket(st, "2.0.0")
    await sock.join("realtime:restart", subs_for(sid), sender.token)
    data = os.path.join(stk.state_dir, "pg", "data")
    cmd = ["/usr/lib/postgresql/15/bin/pg_ctl", "-D", data, "-l", os.path.join(stk.state_dir, "postgres.log"),
           "-m", "fast", "-w", "-t", "30", "restart"]
    if os.getuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--"] + cmd
    # The new postmaster must not hold our pipes: its output goes to the log.
    proc = await asyncio.create_subprocess_exec(*cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert await asyncio.wait_for(proc.wait(), 45) == 0

    # A row inserted while the gateway is not listening yet is never announced; so once it
    # listens again, the channel gets phx_error (ref = join_ref) and must rejoin — and backfill
    # (found by Scripts/faults: castd missed rows inserted right after a PostgreSQL restart).
    conn = await asyncpg.connect(st.pg_url)
    try:
        await conn.execute(
            "insert into public.signaling_messages (session_id, sender_role, recipient_role, message_type, payload)"
            " values ($1::uuid, 'receiver', 'sender', 'answer', '{\"n\": \"gap\"}')", sid)
        deadline = time.monotonic() + 20
        while True:
            assert time.monotonic() < deadline, "no phx_error after the restart"
            m = await sock.recv(timeout=deadline - time.monotonic())
            if m.get("event") == "phx_error":
                break
        assert m["topic"] == "realtime:restart"
        await sock.join("realtime:restart", subs_for(sid), sender.token)
        # And the next one arrives at once.
        await conn.execute(
            "insert into public.signaling_messages (session_id, sender_role, recipient_role, message_type, payload)"
            " values ($1::uuid, 'receiver', 'sender', 'answer', '{\"n\": \"last\"}')", sid)
        m = await sock.next_change()
        assert m["payload"]["data"]["record"]["payload"] == {"n": "last"}
    finally:
        await conn.close()


@pytest.mark.parametrize("vsn", ["1.0.0", "2.0.0"])
async def test_several_channels_on_one_socket_each_read_under_its_own_token(st, approved, open_socket, vsn):
    receiver, sender, sid = approved
    sock = await open_socket(st, vsn)
    only_inserts = [subs_for(sid)[1]]
    await sock.join("realtime:as-sender", only_inserts, sender.token)
    await sock.join("realtime:as-receiver", only_inserts, receiver.token)
    await sender.insert(sid, "sender", "receiver", "offer", {"n": 1})
    await receiver.insert(sid, "receiver", "sender", "answer", {"n": 2})
    await sender.insert(sid, "sender", "receiver", "ice_candidate", {"n": 3})
    seen = []
    while len(seen) < 3:
        m = await sock.next_change()
        seen.append((m["topic"], m["payload"]["data"]["record"]["message_type"], m["payload"]["data"]["record"]["payload"]))
    # Events in commit order; each row only on the channel whose token may read it.
    assert seen == [("realtime:as-receiver", "offer", {"n": 1}),
                    ("realtime:as-sender", "answer", {"n": 2}),
                    ("realtime:as-receiver", "ice_candidate", {"n": 3})]
