"""Pairing and approval (spec §3–§5, docs/contract.md): PIN and QR, single use,
brute-force budget with Retry-After, five wrong QR tokens, approve/deny."""
import concurrent.futures
import re
import urllib.parse
import uuid

import pytest

from castkit.devstack import api, db, random_ip, rest, sign_in, supabase_client


def create(stack, receiver):
    r = api(stack, receiver.access_token, "session-create", {})
    assert r.status_code == 200, r.text
    return r.json()


def test_session_create_returns_pin_qr_url_and_expiry(stack):
    b = create(stack, sign_in(stack))
    assert set(b) == {"sessionId", "pin", "qrUrl", "expiresAt"}
    assert re.fullmatch(r"\d{6}", b["pin"])
    uuid.UUID(b["sessionId"])
    u = urllib.parse.urlsplit(b["qrUrl"])
    assert f"{u.scheme}://{u.netloc}" == stack.api_url and u.path == "/pair"
    q = urllib.parse.parse_qs(u.query)
    assert q["s"] == [b["sessionId"]]
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", q["t"][0])  # 32 bytes, base64url, no padding
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", b["expiresAt"])


async def test_secrets_are_stored_only_as_hashes(stack):
    receiver = sign_in(stack)
    b = create(stack, receiver)
    conn = await db(stack)
    try:
        s = await conn.fetchrow("select * from private.pairing_secrets where session_id = $1", uuid.UUID(b["sessionId"]))
        dump = str(dict(s))
        token = urllib.parse.parse_qs(urllib.parse.urlsplit(b["qrUrl"]).query)["t"][0]
        assert b["pin"] not in dump and token not in dump
        import hashlib
        assert s["qr_token_sha256"] == hashlib.sha256(token.encode()).hexdigest()
        assert re.fullmatch(r"[0-9a-f]{64}", s["pin_hmac"])
    finally:
        await conn.close()
    # clients can read neither the secrets nor the attempt log
    r = rest(stack, receiver.access_token, "GET", "pairing_secrets")
    assert r.status_code == 404


def test_full_pin_pairing_wrong_pin_then_right_pin_then_approve(stack):
    rc, receiver = supabase_client(stack)
    sc, sender = supabase_client(stack)
    b = create(stack, receiver)
    wrong = f"{(int(b['pin']) + 1) % 1_000_000:06d}"
    ip = random_ip()
    r = api(stack, sender.access_token, "session-pair", {"pin": wrong}, headers={"X-Forwarded-For": ip})
    assert r.status_code == 400
    assert r.json() == {"error": {"code": "invalid_code", "message": "Invalid or expired pairing code"}}
    grouped = f"{b['pin'][:3]} {b['pin'][3:]}"  # shown as "482 913"; non-digits are stripped
    r = api(stack, sender.access_token, "session-pair", {"pin": grouped, "deviceName": "Jane's Linux"},
            headers={"X-Forwarded-For": ip})
    assert r.status_code == 200, r.text
    assert r.json() == {"sessionId": b["sessionId"], "status": "pairing"}
    # the receiver sees the join request; the sender sees its session in `pairing`
    jr = rc.table("signaling_messages").select("message_type,payload,sender_role,recipient_role") \
        .eq("session_id", b["sessionId"]).execute().data
    assert jr == [{"message_type": "join_request", "payload": {"deviceName": "Jane's Linux"},
                   "sender_role": "sender", "recipient_role": "receiver"}]
    row = sc.table("casting_sessions").select("status,sender_user_id,device_name").execute().data
    assert row == [{"status": "pairing", "sender_user_id": sender.user_id, "device_name": "Jane's Linux"}]
    # approve with stream preferences
    prefs = {"autoQuality": False, "resolution": "720p", "frameRate": 60}
    a = api(stack, receiver.access_token, "session-approve", {"sessionId": b["sessionId"], "approve": True, "streamPrefs": prefs})
    assert a.status_code == 200
    assert a.json()["status"] == "connecting" and a.json()["sessionId"] == b["sessionId"]
    approved = sc.table("signaling_messages").select("message_type,payload").eq("session_id", b["sessionId"]) \
        .eq("recipient_role", "sender").execute().data
    assert approved == [{"message_type": "join_approved",
                         "payload": {"senderAuthExpiresAt": a.json()["senderAuthExpiresAt"], "streamPrefs": prefs}}]
    s = sc.table("casting_sessions").select("status,sender_auth_expires_at,created_at").execute().data[0]
    assert s["status"] == "connecting"


async def test_approval_sets_sender_authorization_to_two_hours(stack):
    receiver, sender = sign_in(stack), sign_in(stack)
    b = create(stack, receiver)
    assert api(stack, sender.access_token, "session-pair", {"pin": b["pin"]}).status_code == 200
    a = api(stack, receiver.access_token, "session-approve", {"sessionId": b["sessionId"], "approve": True})
    conn = await db(stack)
    try:
        secs = await conn.fetchval("select extract(epoch from sender_auth_expires_at - updated_at)"
                                   " from public.casting_sessions where id = $1", uuid.UUID(b["sessionId"]))
    finally:
        await conn.close()
    assert float(secs) == 7200.0
    # the default preferences, when the receiver sends none
    got = rest(stack, sender.access_token, "GET", "signaling_messages",
               params={"select": "payload", "session_id": f"eq.{b['sessionId']}"}).json()
    assert got[0]["payload"]["streamPrefs"] == {"autoQuality": True, "resolution": "1080p", "frameRate": 30}
    assert got[0]["payload"]["senderAuthExpiresAt"] == a.json()["senderAuthExpiresAt"]


def test_deny_expires_the_session_and_tells_the_sender(stack):
    sc, sender = supabase_client(stack)
    receiver = sign_in(stack)
    b = create(stack, receiver)
    assert api(stack, sender.access_token, "session-pair", {"pin": b["pin"]}).status_code == 200
    d = api(stack, receiver.access_token, "session-approve", {"sessionId": b["sessionId"], "approve": False})
    assert d.status_code == 200 and d.json() == {"sessionId": b["sessionId"], "status": "expired"}
    got = sc.table("signaling_messages").select("message_type,payload").eq("session_id", b["sessionId"]).execute().data
    assert got == [{"message_type": "disconnect", "payload": {"reason": "denied"}}]
    assert sc.table("casting_sessions").select("status").execute().data == [{"status": "expired"}]
    # approving afterwards is a state error
    again = api(stack, receiver.access_token, "session-approve", {"sessionId": b["sessionId"], "approve": True})
    assert again.status_code == 409 and again.json()["error"]["code"] == "invalid_state"


def test_approve_is_for_the_receiver_only_and_validates_its_body(stack):
    receiver, sender = sign_in(stack), sign_in(stack)
    b = create(stack, receiver)
    assert api(stack, sender.access_token, "session-pair", {"pin": b["pin"]}).status_code == 200
    r = api(stack, sender.access_token, "session-approve", {"sessionId": b["sessionId"], "approve": True})
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    for body in ({"sessionId": b["sessionId"]}, {"sessionId": "x", "approve": True},
                 {"sessionId": b["sessionId"], "approve": True, "streamPrefs": {"frameRate": 25}},
                 {"sessionId": b["sessionId"], "approve": True, "streamPrefs": {"resolution": "4k"}}):
        r = api(stack, receiver.access_token, "session-approve", body)
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request", body


def test_pin_is_single_use(stack):
    receiver = sign_in(stack)
    b = create(stack, receiver)
    assert api(stack, sign_in(stack).access_token, "session-pair", {"pin": b["pin"]}).status_code == 200
    r = api(stack, sign_in(stack).access_token, "session-pair", {"pin": b["pin"]})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_code"


def test_qr_pairing_and_single_use(stack):
    receiver, sender = sign_in(stack), sign_in(stack)
    b = create(stack, receiver)
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(b["qrUrl"]).query)
    body = {"token": q["t"][0], "sessionId": q["s"][0], "deviceName": "x" * 100}
    r = api(stack, sender.access_token, "session-pair", body)
    assert r.status_code == 200 and r.json() == {"sessionId": b["sessionId"], "status": "pairing"}
    got = rest(stack, receiver.access_token, "GET", "signaling_messages",
               params={"select": "payload", "session_id": f"eq.{b['sessionId']}"}).json()
    assert got == [{"payload": {"deviceName": "x" * 80}}]  # spec §4: max 80 characters
    r = api(stack, sign_in(stack).access_token, "session-pair", body)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_code"
    # the PIN of a paired session no longer works either
    r = api(stack, sign_in(stack).access_token, "session-pair", {"pin": b["pin"]})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_code"


def test_five_wrong_qr_tokens_expire_the_session(stack):
    receiver = sign_in(stack)
    b = create(stack, receiver)
    token = urllib.parse.parse_qs(urllib.parse.urlsplit(b["qrUrl"]).query)["t"][0]
    for i in range(5):  # different users and IPs: only the per-session count applies
        r = api(stack, sign_in(stack).access_token, "session-pair",
                {"token": "A" * 43, "sessionId": b["sessionId"]})
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_code", i
    st = rest(stack, receiver.access_token, "GET", "casting_sessions", params={"select": "status"}).json()
    assert st == [{"status": "expired"}]
    r = api(stack, sign_in(stack).access_token, "session-pair", {"token": token, "sessionId": b["sessionId"]})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_code"
    r = api(stack, sign_in(stack).access_token, "session-pair", {"pin": b["pin"]})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_code"


def test_four_wrong_qr_tokens_leave_the_session_pairable(stack):
    receiver = sign_in(stack)
    b = create(stack, receiver)
    token = urllib.parse.parse_qs(urllib.parse.urlsplit(b["qrUrl"]).query)["t"][0]
    for _ in range(4):
        api(stack, sign_in(stack).access_token, "session-pair", {"token": token[:-1] + ("A" if token[-1] != "A" else "B"),
                                                                "sessionId": b["sessionId"]})
    r = api(stack, sign_in(stack).access_token, "session-pair", {"token": token, "sessionId": b["sessionId"]})
    assert r.status_code == 200


@pytest.mark.parametrize("body", [
    {}, {"deviceName": "x"}, {"pin": ["1"]}, {"token": "abc"}, {"token": "abc", "sessionId": "nope"},
    {"pin": "123456", "deviceName": 5},
])
def test_session_pair_invalid_requests(stack, body):
    r = api(stack, sign_in(stack).access_token, "session-pair", body)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request"


def test_bad_json_and_missing_token_on_api_public(stack):
    t = sign_in(stack)
    for ep in ("session-create", "session-pair", "session-approve", "session-update", "session-end"):
        r = api(stack, t.access_token, ep, b"{not json")
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request", ep
        r = api(stack, None, ep, {})
        assert r.status_code == 401 and r.json() == {"error": {"code": "unauthorized", "message": "Missing bearer token"}}, ep
        r = api(stack, stack.key, ep, {})  # the publishable key is not a user
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized", ep
    r = api(stack, None, "ice-config")
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"


def test_per_ip_limit_with_retry_after_and_cf_connecting_ip_first(stack):
    receiver = sign_in(stack)
    b = create(stack, receiver)
    ip = random_ip()
    for i in range(5):  # five failures from five different users, one IP
        r = api(stack, sign_in(stack).access_token, "session-pair", {"pin": "000000x"},
                headers={"X-Forwarded-For": f"{ip}, 10.0.0.1"})
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_code", i
    # the sixth, even with the right PIN and a fresh user, is refused
    fresh = sign_in(stack)
    r = api(stack, fresh.access_token, "session-pair", {"pin": b["pin"]}, headers={"X-Forwarded-For": ip})
    assert r.status_code == 429
    assert r.json()["error"]["code"] == "rate_limited"
    wait = int(r.headers["Retry-After"])
    assert 595 <= wait <= 600
    # cf-connecting-ip wins over x-forwarded-for: a different cf address is a different budget …
    r = api(stack, fresh.access_token, "session-pair", {"pin": b["pin"]},
            headers={"cf-connecting-ip": random_ip(), "X-Forwarded-For": ip})
    assert r.status_code == 200
    # … and the limited address as cf-connecting-ip is refused whatever x-forwarded-for says
    r = api(stack, sign_in(stack).access_token, "session-pair", {"pin": "111111"},
            headers={"cf-connecting-ip": ip, "X-Forwarded-For": random_ip()})
    assert r.status_code == 429


def test_per_user_limit_applies_across_addresses(stack):
    user = sign_in(stack)
    for i in range(5):
        r = api(stack, user.access_token, "session-pair", {"pin": "999999"})  # a new random IP each time
        assert r.status_code == 400, i
    r = api(stack, user.access_token, "session-pair", {"pin": "999999"})
    assert r.status_code == 429 and 595 <= int(r.headers["Retry-After"]) <= 600




def test_parallel_burst_cannot_pass_the_limit(stack):
    receiver = sign_in(stack)
    b = create(stack, receiver)
    ip = random_ip()
    users = [sign_in(stack) for _ in range(12)]

    def attempt(u):
        return api(stack, u.access_token, "session-pair", {"pin": "000001"}, headers={"X-Forwarded-For": ip})

    with concurrent.futures.ThreadPoolExecutor(12) as ex:
        codes = sorted(r.status_code for r in ex.map(attempt, users))
    assert codes.count(400) == 5 and codes.count(429) == 7
    r = api(stack, sign_in(stack).access_token, "session-pair", {"pin": b["pin"]}, headers={"X-Forwarded-For": ip})
    assert r.status_code == 429


@pytest.mark.timeout(40)
def test_pairing_window_and_retry_after_with_short_windows(stack_factory):
    s = stack_factory(pairing_window=2, pair_failure_window=3)
    receiver = sign_in(s)
    b = create(s, receiver)
    user = sign_in(s)
    for _ in range(5):
        assert api(s, user.access_token, "session-pair", {"pin": "12"}).status_code == 400
    r = api(s, user.access_token, "session-pair", {"pin": b["pin"]})
    assert r.status_code == 429
    wait = int(r.headers["Retry-After"])
    assert 1 <= wait <= 3
    import time
    time.sleep(wait + 0.2)  # the window is the thing under test: let it pass
    r = api(s, user.access_token, "session-pair", {"pin": b["pin"]})
    # the budget is free again, but the 2 s pairing window has passed too
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_code"


def test_peer_address_is_the_fallback_without_forwarding_headers(stack_factory):
    # A stack of its own, so that no other test's attempts share 127.0.0.1.
    s = stack_factory(pair_failure_limit=2)
    for _ in range(2):
        assert api(s, sign_in(s).access_token, "session-pair", {"pin": "1"}, headers={}).status_code == 400
    r = api(s, sign_in(s).access_token, "session-pair", {"pin": "1"}, headers={})
    assert r.status_code == 429
    # another (claimed) address still has its budget
    r = api(s, sign_in(s).access_token, "session-pair", {"pin": "1"}, headers={"X-Forwarded-For": random_ip()})
    assert r.status_code == 400
