"""/api/public/session-create (receiver) and /api/public/session-pair (sender):
spec §3, §4 (docs/contract.md).

Brute-force budget (spec §4): `pair_failure_limit` failures per client IP and
per user per rolling `pair_failure_window`. Each attempt is written (and
committed) BEFORE the code is checked, under a lock per IP and per user, and
an attempt still being checked counts as a failure, so a parallel burst cannot
get past the limit. Five wrong QR tokens for one session expire it."""
from __future__ import annotations

import json
import uuid
from functools import partial

import asyncpg
from aiohttp import web

from .db import as_service
from .pairing_codes import new_pin, new_qr_token, normalize_pin, pin_hmac, qr_token_sha256, retry_after
from .public_common import ApiError, caller, client_ip, endpoint, json_body
from .timefmt import iso_ms

DEVICE_NAME_MAX = 80  # spec §4


def device_name_of(body: dict) -> str:
    v = body.get("deviceName")
    if v is None:
        return "iPad"  # spec §4 default
    if not isinstance(v, str):
        raise ApiError(400, "invalid_request", "deviceName must be a string")
    v = v.strip()
    return v[:DEVICE_NAME_MAX] if v else "iPad"


async def record_attempt(ctx, ip: str, user_id: str, method: str, session_id) -> int:
    """Check the budget and record this attempt, in one committed transaction.
    Raises 429 rate_limited with Retry-After when the IP or the user is over."""
    s = ctx.settings
    async with as_service(ctx) as conn:
        # One lock per IP and per user (in a fixed order: no deadlock).
        keys = sorted({f"ip:{ip}", f"user:{user_id}"})
        for k in keys:
            await conn.execute("select pg_advisory_xact_lock(hashtextextended($1, 4))", k)
        rows = await conn.fetch(
            "select client_ip = $1 as by_ip, user_id = $2::uuid as by_user,"
            " extract(epoch from clock_timestamp() - attempted_at)::float8 as age"
            " from private.pairing_attempts"
            " where (client_ip = $1 or user_id = $2::uuid) and succeeded is not true"
            "   and attempted_at > clock_timestamp() - make_interval(secs => $3)",
            ip, user_id, s.pair_failure_window)
        waits = [w for w in (
            retry_after([r["age"] for r in rows if r["by_ip"]], s.pair_failure_limit, s.pair_failure_window),
            retry_after([r["age"] for r in rows if r["by_user"]], s.pair_failure_limit, s.pair_failure_window),
        ) if w is not None]
        if waits:
            wait = max(waits)
            raise ApiError(429, "rate_limited", f"Too many pairing attempts; try again in {wait} s",
                           {"Retry-After": str(wait)})
        return await conn.fetchval(
            "insert into private.pairing_attempts (client_ip, user_id, method, session_id)"
            " values ($1, $2::uuid, $3, $4) returning id", ip, user_id, method, session_id)


async def session_create(ctx, request: web.Request) -> web.Response:
    s = ctx.settings
    claims = caller(ctx, request)
    await json_body(request)  # {} (docs/contract.md, receiver endpoints); a bad body is still a 400
    token = new_qr_token()
    for _ in range(20):  # a PIN must be unique among live codes
        pin = new_pin()
        try:
            async with as_service(ctx) as conn:
                row = await conn.fetchrow(
                    "insert into public.casting_sessions (receiver_user_id, expires_at)"
                    " values ($1::uuid, now() + make_interval(secs => $2)) returning id, expires_at",
                    claims["sub"], s.pairing_window)
                await conn.execute(
                    "insert into private.pairing_secrets (session_id, pin_hmac, qr_token_sha256)"
                    " values ($1, $2, $3)", row["id"], pin_hmac(s.pin_secret, pin), qr_token_sha256(token))
            break
        except asyncpg.UniqueViolationError:
            continue
    else:
        raise ApiError(500, "server_error", "Could not allocate a pairing code")
    sid = str(row["id"])
    qr = f"{s.api_url.rstrip('/')}/pair?t={token}&s={sid}"
    return web.json_response({"sessionId": sid, "pin": pin, "qrUrl": qr, "expiresAt": iso_ms(row["expires_at"])})


async def session_pair(ctx, request: web.Request) -> web.Response:
    s = ctx.settings
    claims = caller(ctx, request)
    body = await json_body(request)
    uid = claims["sub"]
    device = device_name_of(body)
    pin_raw, token = body.get("pin"), body.get("token")
    if pin_raw is not None and not isinstance(pin_raw, (str, int)):
        raise ApiError(400, "invalid_request", "pin must be a string")
    if token is not None and not isinstance(token, str):
        raise ApiError(400, "invalid_request", "token must be a string")
    if pin_raw is None and token is None:
        raise ApiError(400, "invalid_request", "pin, or token and sessionId, required")
    qr_session = None
    if pin_raw is None:
        sid_raw = body.get("sessionId")
        try:
            qr_session = uuid.UUID(sid_raw) if isinstance(sid_raw, str) else None
        except ValueError:
            qr_session = None
        if qr_session is None:
            raise ApiError(400, "invalid_request", "sessionId must be a UUID")
    ip = client_ip(request)
    attempt = await record_attempt(ctx, ip, uid, "pin" if pin_raw is not None else "qr", qr_session)

    invalid = ApiError(400, "invalid_code", "Invalid or expired pairing code")
    failed = False
    async with as_service(ctx) as conn:
        if pin_raw is not None:
            digits = normalize_pin(pin_raw)
            row = None
            if len(digits) == 6:
                row = await conn.fetchrow(
                    "select c.id from private.pairing_secrets p join public.casting_sessions c on c.id = p.session_id"
                    " where p.pin_hmac = $1 and c.status = 'waiting' and c.expires_at > now()"
                    " for update of c", pin_hmac(s.pin_secret, digits))
            if row is None:
                raise invalid
            sid = row["id"]
        else:
            row = await conn.fetchrow(
                "select c.id, c.status, c.expires_at > now() as live, p.qr_token_sha256, p.failed_qr_count"
                " from public.casting_sessions c left join private.pairing_secrets p on p.session_id = c.id"
                " where c.id = $1 for update of c", qr_session)
            if row is None or row["status"] != "waiting" or not row["live"] or row["qr_token_sha256"] is None:
                raise invalid
            if row["qr_token_sha256"] != qr_token_sha256(token):
                # spec §4: five wrong QR tokens for one session expire it.
                n = await conn.fetchval(
                    "update private.pairing_secrets set failed_qr_count = failed_qr_count + 1"
                    " where session_id = $1 returning failed_qr_count", qr_session)
                if n >= s.qr_failure_limit:
                    await conn.execute(
                        "update public.casting_sessions set status = 'expired', ended_at = now(), updated_at = now()"
                        " where id = $1", qr_session)
                    await conn.execute("delete from private.pairing_secrets where session_id = $1", qr_session)
                failed = True  # commit the count, then answer
            else:
                sid = qr_session
        if failed:
            return invalid.response()
        await conn.execute(
            "update public.casting_sessions set sender_user_id = $2::uuid, status = 'pairing', device_name = $3,"
            " updated_at = now() where id = $1", sid, uid, device)
        await conn.execute("delete from private.pairing_secrets where session_id = $1", sid)
        await conn.execute(
            "insert into public.signaling_messages (session_id, sender_role, recipient_role, message_type, payload)"
            " values ($1, 'sender', 'receiver', 'join_request', $2::jsonb)",
            sid, json.dumps({"deviceName": device}))
        await conn.execute("update private.pairing_attempts set succeeded = true, session_id = $2 where id = $1",
                           attempt, sid)
    return web.json_response({"sessionId": str(sid), "status": "pairing"})


def setup(app: web.Application, ctx) -> None:
    """The pairing routes; the handlers above take the gateway's context, `endpoint` maps their errors."""
    app.router.add_post("/api/public/session-create", endpoint(partial(session_create, ctx)))
    app.router.add_post("/api/public/session-pair", endpoint(partial(session_pair, ctx)))
