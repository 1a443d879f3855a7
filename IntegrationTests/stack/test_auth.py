"""/auth/v1 against the official supabase Python client (docs/contract.md, wire A)."""
import time

import httpx
import jwt
import pytest
from supabase import ClientOptions, create_client
from supabase_auth.errors import AuthApiError

from castkit.devstack import auth_headers, sign_in


def client(stack):
    return create_client(stack.supabase_url, stack.key,
                         ClientOptions(auto_refresh_token=False, persist_session=False))


def test_anonymous_sign_in_with_the_official_client_issues_supabase_claims(stack):
    c = client(stack)
    res = c.auth.sign_in_anonymously()
    s, u = res.session, res.user
    assert u.is_anonymous is True and u.aud == "authenticated" and u.role == "authenticated"
    assert s.token_type == "bearer" and s.expires_in == 3600
    claims = jwt.decode(s.access_token, options={"verify_signature": False})
    assert claims["sub"] == u.id
    assert claims["role"] == "authenticated" and claims["aud"] == "authenticated"
    assert claims["is_anonymous"] is True and claims["aal"] == "aal1"
    assert claims["amr"][0]["method"] == "anonymous"
    assert claims["exp"] - claims["iat"] == 3600 and s.expires_at == claims["exp"]
    assert claims["iss"] == f"{stack.supabase_url}/auth/v1"
    assert len(claims["session_id"]) == 36
    assert jwt.get_unverified_header(s.access_token)["alg"] == "HS256"
    # the user endpoint returns the bare user object
    got = c.auth.get_user(s.access_token)
    assert got.user.id == u.id and got.user.is_anonymous is True


def test_refresh_rotates_and_a_reused_token_is_refused_and_revokes_the_family(stack):
    c = client(stack)
    first = c.auth.sign_in_anonymously().session
    second = c.auth.refresh_session(first.refresh_token).session
    assert second.refresh_token != first.refresh_token
    assert second.user.id == first.user.id
    c2 = jwt.decode(second.access_token, options={"verify_signature": False})
    c1 = jwt.decode(first.access_token, options={"verify_signature": False})
    assert c2["session_id"] == c1["session_id"] and c2["sub"] == c1["sub"]
    third = c.auth.refresh_session(second.refresh_token).session
    # reusing a rotated token is refused …
    with pytest.raises(AuthApiError) as e:
        c.auth.refresh_session(first.refresh_token)
    assert e.value.code == "refresh_token_already_used" and e.value.status == 400
    # … and the whole family is revoked: the newest token no longer works either
    r = httpx.post(f"{stack.supabase_url}/auth/v1/token?grant_type=refresh_token",
                   headers=auth_headers(stack, stack.key), json={"refresh_token": third.refresh_token})
    assert r.status_code == 400
    assert r.json()["code"] in ("refresh_token_already_used", "session_not_found")
    assert r.headers["X-Supabase-Api-Version"] == "2024-01-01"


def test_unknown_refresh_token_is_refresh_token_not_found(stack):
    r = httpx.post(f"{stack.supabase_url}/auth/v1/token?grant_type=refresh_token",
                   headers=auth_headers(stack, stack.key), json={"refresh_token": "nope-not-a-token"})
    assert r.status_code == 400
    b = r.json()
    assert b["code"] == "refresh_token_not_found" and b["error_code"] == "refresh_token_not_found"
    assert "Refresh Token Not Found" in b["message"]


def test_auth_requires_the_apikey(stack):
    r = httpx.post(f"{stack.supabase_url}/auth/v1/signup", json={"data": {}})
    assert r.status_code == 401 and r.json()["message"] == "No API key found in request"
    r = httpx.post(f"{stack.supabase_url}/auth/v1/signup", headers={"apikey": "wrong"}, json={"data": {}})
    assert r.status_code == 401 and r.json()["message"] == "Invalid API key"


def test_user_endpoint_refuses_missing_and_forged_tokens(stack):
    r = httpx.get(f"{stack.supabase_url}/auth/v1/user", headers=auth_headers(stack))
    assert r.status_code == 401 and r.json()["code"] == "no_authorization"
    forged = jwt.encode({"sub": "00000000-0000-0000-0000-000000000001", "role": "authenticated",
                         "exp": int(time.time()) + 60}, "not-the-project-secret-but-long-enough-for-hs256", algorithm="HS256")
    r = httpx.get(f"{stack.supabase_url}/auth/v1/user", headers=auth_headers(stack, forged))
    assert r.status_code == 403 and r.json()["code"] == "bad_jwt"


def test_logout_revokes_the_session_refresh_tokens(stack):
    t = sign_in(stack)
    r = httpx.post(f"{stack.supabase_url}/auth/v1/logout", headers=auth_headers(stack, t.access_token))
    assert r.status_code == 204
    r = httpx.post(f"{stack.supabase_url}/auth/v1/token?grant_type=refresh_token",
                   headers=auth_headers(stack, stack.key), json={"refresh_token": t.refresh_token})
    assert r.status_code == 400 and r.json()["code"] == "session_not_found"


@pytest.mark.timeout(30)
def test_access_token_lifetime_is_configurable_and_refresh_recovers(stack_factory):
    short = stack_factory(access_token_ttl=2)
    c = client(short)
    s = c.auth.sign_in_anonymously().session
    assert s.expires_in == 2
    claims = jwt.decode(s.access_token, options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] == 2
    # Wait out the real lifetime: exp has one-second resolution and no leeway.
    while time.time() <= claims["exp"] + 0.05:
        time.sleep(0.1)
    r = httpx.get(f"{short.supabase_url}/auth/v1/user", headers=auth_headers(short, s.access_token))
    assert r.status_code == 403 and "expired" in r.json()["message"]
    fresh = c.auth.refresh_session(s.refresh_token).session
    r = httpx.get(f"{short.supabase_url}/auth/v1/user", headers=auth_headers(short, fresh.access_token))
    assert r.status_code == 200 and r.json()["id"] == claims["sub"]
