"""/auth/v1: anonymous sign-in, refresh with rotation and reuse detection,
the user object, logout (docs/contract.md, wire A; GoTrue's behaviour).

Refresh tokens are opaque random strings, stored only as SHA-256. Using a
token rotates it (the old one is revoked, a child is issued in the same
family); presenting a revoked token again is a reuse: the whole family is
revoked and the answer is 400 refresh_token_already_used."""
from __future__ import annotations

import hashlib
import json
import secrets
import time
from functools import partial

import jwt
from aiohttp import web

from .db import as_service
from .errors import AUTH_API_VERSION, auth_error, check_apikey, json_response
from .timefmt import iso_us


def sha256_hex(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()


def new_refresh_token() -> str:
    return secrets.token_urlsafe(16)  # GoTrue's are short opaque strings too


def user_object(row) -> dict:
    return {
        "id": str(row["id"]),
        "aud": row["aud"],
        "role": row["role"],
        "email": "",
        "phone": "",
        "last_sign_in_at": iso_us(row["last_sign_in_at"]),
        "app_metadata": json.loads(row["raw_app_meta_data"]) if isinstance(row["raw_app_meta_data"], str) else row["raw_app_meta_data"],
        "user_metadata": json.loads(row["raw_user_meta_data"]) if isinstance(row["raw_user_meta_data"], str) else row["raw_user_meta_data"],
        "identities": [],
        "created_at": iso_us(row["created_at"]),
        "updated_at": iso_us(row["updated_at"]),
        "is_anonymous": row["is_anonymous"],
    }


def access_token(ctx, user_id: str, session_id: str, now: int, sign_in_at: int) -> tuple[str, int]:
    s = ctx.settings
    exp = now + s.access_token_ttl
    claims = {
        "iss": s.supabase_url.rstrip("/") + "/auth/v1",
        "sub": user_id,
        "aud": "authenticated",
        "exp": exp,
        "iat": now,
        "email": "",
        "phone": "",
        "app_metadata": {},
        "user_metadata": {},
        "role": "authenticated",
        "aal": "aal1",
        "amr": [{"method": "anonymous", "timestamp": sign_in_at}],
        "session_id": session_id,
        "is_anonymous": True,
    }
    return jwt.encode(claims, s.jwt_secret, algorithm="HS256"), exp


def session_body(ctx, user_row, session_id: str, refresh: str, sign_in_at: int) -> dict:
    now = int(time.time())
    token, exp = access_token(ctx, str(user_row["id"]), session_id, now, sign_in_at)
    return {
        "access_token": token,
        "token_type": "bearer",
        "expires_in": ctx.settings.access_token_ttl,
        "expires_at": exp,
        "refresh_token": refresh,
        "user": user_object(user_row),
    }


def ok(body: dict) -> web.Response:
    return json_response(body, 200, {"X-Supabase-Api-Version": AUTH_API_VERSION})


async def read_json(request: web.Request):
    try:
        raw = await request.read()
        return json.loads(raw) if raw.strip() else {}
    except (ValueError, UnicodeDecodeError):
        return None


async def signup(ctx, request: web.Request) -> web.Response:
    if (r := check_apikey(request, ctx.settings.anon_key)) is not None:
        return r
    body = await read_json(request)
    if not isinstance(body, dict):
        return auth_error(400, "bad_json", "Could not parse request body as JSON")
    if body.get("email") or body.get("phone") or body.get("password"):
        return auth_error(422, "email_provider_disabled", "Only anonymous sign-ins are enabled in this stand-in")
    data = body.get("data") if isinstance(body.get("data"), dict) else {}
    refresh = new_refresh_token()
    async with as_service(ctx) as conn:
        user = await conn.fetchrow(
            "insert into auth.users (raw_user_meta_data, raw_app_meta_data, last_sign_in_at)"
            " values ($1::jsonb, '{}'::jsonb, now()) returning *", json.dumps(data))
        sid = await conn.fetchval("insert into auth.sessions (user_id) values ($1) returning id", user["id"])
        await conn.execute(
            "insert into auth.refresh_tokens (token_sha256, user_id, session_id) values ($1, $2, $3)",
            sha256_hex(refresh), user["id"], sid)
    return ok(session_body(ctx, user, str(sid), refresh, int(user["last_sign_in_at"].timestamp())))


async def token(ctx, request: web.Request) -> web.Response:
    s = ctx.settings
    if (r := check_apikey(request, ctx.settings.anon_key)) is not None:
        return r
    grant = request.query.get("grant_type")
    if grant != "refresh_token":
        return auth_error(400, "unsupported_grant_type", "Unsupported grant type: only refresh_token is served here")
    body = await read_json(request)
    if not isinstance(body, dict):
        return auth_error(400, "bad_json", "Could not parse request body as JSON")
    rt = body.get("refresh_token")
    if not isinstance(rt, str) or not rt:
        return auth_error(400, "validation_failed", "refresh_token required")
    new_rt = new_refresh_token()
    async with as_service(ctx) as conn:
        row = await conn.fetchrow(
            "select t.id, t.user_id, t.session_id, t.revoked, s.revoked_at"
            " from auth.refresh_tokens t join auth.sessions s on s.id = t.session_id"
            " where t.token_sha256 = $1 for update of t", sha256_hex(rt))
        if row is None:
            return auth_error(400, "refresh_token_not_found", "Invalid Refresh Token: Refresh Token Not Found")
        if row["revoked_at"] is not None:
            return auth_error(400, "session_not_found", "Invalid Refresh Token: Session Not Found")
        if row["revoked"]:
            # Reuse of a rotated token: revoke the whole family (GoTrue's reuse detection).
            await conn.execute("update auth.refresh_tokens set revoked = true, updated_at = now()"
                               " where session_id = $1", row["session_id"])
            await conn.execute("update auth.sessions set revoked_at = now() where id = $1", row["session_id"])
            return auth_error(400, "refresh_token_already_used", "Invalid Refresh Token: Already Used")
        await conn.execute("update auth.refresh_tokens set revoked = true, updated_at = now() where id = $1", row["id"])
        await conn.execute(
            "insert into auth.refresh_tokens (token_sha256, user_id, session_id, parent_id) values ($1, $2, $3, $4)",
            sha256_hex(new_rt), row["user_id"], row["session_id"], row["id"])
        await conn.execute("update auth.sessions set refreshed_at = now() where id = $1", row["session_id"])
        user = await conn.fetchrow("select * from auth.users where id = $1", row["user_id"])
        sess = await conn.fetchrow("select created_at from auth.sessions where id = $1", row["session_id"])
    return ok(session_body(ctx, user, str(row["session_id"]), new_rt, int(sess["created_at"].timestamp())))


async def bearer_claims(ctx, request: web.Request):
    """(claims, None), or (None, the error response): the apikey, then the Bearer token."""
    if (r := check_apikey(request, ctx.settings.anon_key)) is not None:
        return None, r
    h = request.headers.get("Authorization", "")
    if not h.lower().startswith("bearer "):
        return None, auth_error(401, "no_authorization", "This endpoint requires a Bearer token")
    try:
        claims = ctx.verify_jwt(h[7:].strip())
    except jwt.ExpiredSignatureError:
        return None, auth_error(403, "bad_jwt", "invalid JWT: unable to parse or verify signature, token has invalid claims: token is expired")
    except jwt.InvalidTokenError:
        return None, auth_error(403, "bad_jwt", "invalid JWT: unable to parse or verify signature")
    if claims.get("role") != "authenticated" or not claims.get("sub"):
        return None, auth_error(403, "bad_jwt", "invalid claim: missing sub claim")
    return claims, None


async def user(ctx, request: web.Request) -> web.Response:
    claims, err = await bearer_claims(ctx, request)
    if err is not None:
        return err
    async with as_service(ctx) as conn:
        row = await conn.fetchrow("select * from auth.users where id = $1::uuid", claims["sub"])
        live = await conn.fetchval("select revoked_at is null from auth.sessions where id = $1::uuid",
                                   claims.get("session_id") or "00000000-0000-0000-0000-000000000000")
    if row is None:
        return auth_error(403, "user_not_found", "User from sub claim in JWT does not exist")
    if not live:
        return auth_error(403, "session_not_found", "Session from session_id claim in JWT does not exist")
    return ok(user_object(row))


async def logout(ctx, request: web.Request) -> web.Response:
    claims, err = await bearer_claims(ctx, request)
    if err is not None:
        return err
    async with as_service(ctx) as conn:
        if request.query.get("scope") == "global":
            await conn.execute("update auth.sessions set revoked_at = now() where user_id = $1::uuid and revoked_at is null", claims["sub"])
        elif claims.get("session_id"):
            await conn.execute("update auth.sessions set revoked_at = now() where id = $1::uuid", claims["session_id"])
    return web.Response(status=204, headers={"X-Supabase-Api-Version": AUTH_API_VERSION})


def setup(app: web.Application, ctx) -> None:
    """The /auth/v1 routes (GoTrue's anonymous subset), each a handler above taking the gateway's context."""
    app.router.add_post("/auth/v1/signup", partial(signup, ctx))
    app.router.add_post("/auth/v1/token", partial(token, ctx))
    app.router.add_get("/auth/v1/user", partial(user, ctx))
    app.router.add_post("/auth/v1/logout", partial(logout, ctx))
