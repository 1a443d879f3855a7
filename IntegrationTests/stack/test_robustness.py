"""Seeded junk against the gateway's parsers: every answer is a client error
in the documented shape, never a 500 or a dropped connection (the gateway is
Python, outside the libFuzzer package, so this is its bounded stand-in)."""
import json
import random

import httpx
import pytest

from gateway.postgrest_query import QueryError, parse_query

from castkit.devstack import paired_session

COLS = {"id": "uuid", "session_id": "uuid", "recipient_role": "text", "payload": "jsonb",
        "created_at": "timestamp with time zone"}
ALPHABET = "abcdefghijklmnopqrstuvwxyz_.,()\"'*!:-0123456789 %\\\u00e9\u0000"


def junk(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(n)))


def test_query_parser_only_raises_query_errors():
    rng = random.Random(2)
    keys = list(COLS) + ["select", "order", "limit", "offset", "bogus"]
    for _ in range(5000):
        items = [(rng.choice(keys), junk(rng, 24)) for _ in range(rng.randrange(4))]
        try:
            parse_query(items, COLS)
        except QueryError as e:
            assert e.status == 400 and e.code in ("42703", "PGRST100")


@pytest.mark.timeout(90)
def test_junk_requests_get_client_errors_not_500(stack):
    rng = random.Random(7)
    ps = paired_session(stack)
    t = ps.sender.access_token
    bodies = [b"", b"{", b"[]", b"null", b"1", b'"x"', b"[1,2]", b'{"pin": null}', b'{"pin": {}}',
              b'{"sessionId": 5}', b'{"payload": "\\u0000"}', "{\"deviceName\": \"\u00e9\"}".encode(),
              b"\xff\xfe", json.dumps({"sessionId": ps.session_id, "action": None}).encode(),
              json.dumps({"session_id": ps.session_id, "sender_role": "sender", "recipient_role": "receiver",
                          "message_type": "offer", "payload": {"s": "\u0000"}}).encode()]
    with httpx.Client(timeout=10) as c:
        for i in range(240):
            body = rng.choice(bodies) if i % 2 else junk(rng, 40).encode()
            kind = i % 3
            if kind == 0:
                ep = rng.choice(["session-create", "session-pair", "session-approve", "session-update", "session-end"])
                r = c.post(f"{stack.api_url}/api/public/{ep}", content=body,
                           headers={"Authorization": f"Bearer {t}", "X-Forwarded-For": f"198.19.{i}.1"})
                assert r.status_code in (200, 400, 404, 409, 429), (ep, body, r.status_code, r.text)
                assert set(r.json()) <= {"error", "sessionId", "status", "pin", "qrUrl", "expiresAt",
                                         "senderAuthExpiresAt"}
            elif kind == 1:
                r = c.post(f"{stack.supabase_url}/rest/v1/signaling_messages", content=body,
                           headers={"apikey": stack.key, "Authorization": f"Bearer {t}", "Prefer": "return=minimal"})
                assert r.status_code in (201, 400, 401, 403), (body, r.status_code, r.text)
                if r.status_code != 201:
                    assert set(r.json()) == {"code", "message", "details", "hint"}
            else:
                q = {junk(rng, 10) or "x": junk(rng, 20), "select": rng.choice(["*", "id", junk(rng, 8)])}
                r = c.get(f"{stack.supabase_url}/rest/v1/signaling_messages", params=q,
                          headers={"apikey": stack.key, "Authorization": f"Bearer {t}"})
                assert r.status_code in (200, 400), (q, r.status_code, r.text)
