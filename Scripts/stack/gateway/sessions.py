"""/api/public/session-approve, session-update, session-end: the session
state machine after pairing (spec §5, §9, §10; docs/contract.md "Signaling rows").

    waiting → pairing → connecting → connected → disconnected
                 └──────── deny ──→ expired (also: pairing window over, 5 wrong QR tokens)

All times are the database's now(), the same clock RLS compares against."""
from __future__ import annotations

import json
from functools import partial

from aiohttp import web

from .db import as_service
from .public_common import ApiError, caller, endpoint, json_body, session_id_field
from .timefmt import iso_ms

LIVE = ("pairing", "connecting", "connected")
RESOLUTIONS = ("720p", "1080p", "native")
FRAME_RATES = (30, 60)
DEFAULT_PREFS = {"autoQuality": True, "resolution": "1080p", "frameRate": 30}


def stream_prefs_of(body: dict) -> dict:
    """spec §5: the receiver's preferences only; validated, unknown keys dropped."""
    p = body.get("streamPrefs")
    if p is None:
        return dict(DEFAULT_PREFS)
    if not isinstance(p, dict):
        raise ApiError(400, "invalid_request", "streamPrefs must be an object")
    out = dict(DEFAULT_PREFS)
    if "autoQuality" in p:
        if not isinstance(p["autoQuality"], bool):
            raise ApiError(400, "invalid_request", "streamPrefs.autoQuality must be a boolean")
        out["autoQuality"] = p["autoQuality"]
    if "resolution" in p:
        if p["resolution"] not in RESOLUTIONS:
            raise ApiError(400, "invalid_request", "streamPrefs.resolution must be 720p, 1080p or native")
        out["resolution"] = p["resolution"]
    if "frameRate" in p:
        if isinstance(p["frameRate"], bool) or p["frameRate"] not in FRAME_RATES:
            raise ApiError(400, "invalid_request", "streamPrefs.frameRate must be 30 or 60")
        out["frameRate"] = p["frameRate"]
    return out


async def lock_for_rows(conn, session_id) -> None:
    """Takes the session's signaling-insert lock (`private.lock_session_inserts`, the
    limits trigger's advisory lock, 0005_settings_and_limits.sql) before the session
    row is locked FOR UPDATE. An insert takes that advisory lock in its BEFORE trigger
    and then, in its foreign-key check, a KEY SHARE lock on the session row; an endpoint
    that locked the row first and then inserted took the two in the other order and
    could deadlock with a sender's insert (Postgres aborts one: a 500 on session-end
    while castd was trickling candidates)."""
    await conn.execute("select private.lock_session_inserts($1::uuid)", str(session_id))


async def insert_row(conn, session_id, sender_role: str, recipient_role: str, message_type: str, payload: dict) -> None:
    await conn.execute(
        "insert into public.signaling_messages (session_id, sender_role, recipient_role, message_type, payload)"
        " values ($1, $2, $3, $4, $5::jsonb)", session_id, sender_role, recipient_role, message_type, json.dumps(payload))


async def session_approve(ctx, request: web.Request) -> web.Response:
    claims = caller(ctx, request)
    body = await json_body(request)
    sid = session_id_field(body)
    approve = body.get("approve")
    if not isinstance(approve, bool):
        raise ApiError(400, "invalid_request", "approve must be true or false")
    prefs = stream_prefs_of(body) if approve else None
    async with as_service(ctx) as conn:
        await lock_for_rows(conn, sid)
        row = await conn.fetchrow(
            "select status, receiver_user_id = $2::uuid as mine from public.casting_sessions where id = $1 for update",
            sid, claims["sub"])
        if row is None or not row["mine"]:
            raise ApiError(404, "not_found", "Session not found")
        if row["status"] != "pairing":
            raise ApiError(409, "invalid_state", f"Session is {row['status']}, not pairing")
        if approve:
            exp = await conn.fetchval(
                "update public.casting_sessions set status = 'connecting', stream_prefs = $2::jsonb,"
                " sender_auth_expires_at = now() + make_interval(secs => $3), updated_at = now()"
                " where id = $1 returning sender_auth_expires_at", sid, json.dumps(prefs), ctx.settings.sender_auth)
            await insert_row(conn, sid, "receiver", "sender", "join_approved",
                             {"senderAuthExpiresAt": iso_ms(exp), "streamPrefs": prefs})
            return web.json_response({"sessionId": str(sid), "status": "connecting", "senderAuthExpiresAt": iso_ms(exp)})
        await conn.execute(
            "update public.casting_sessions set status = 'expired', ended_at = now(), updated_at = now() where id = $1", sid)
        await insert_row(conn, sid, "receiver", "sender", "disconnect", {"reason": "denied"})
    return web.json_response({"sessionId": str(sid), "status": "expired"})


async def session_update(ctx, request: web.Request) -> web.Response:
    claims = caller(ctx, request)
    body = await json_body(request)
    sid = session_id_field(body)
    action = body.get("action")
    if action not in ("connected", "heartbeat", "end"):
        raise ApiError(400, "invalid_request", "action must be connected, heartbeat or end")
    async with as_service(ctx) as conn:
        row = await conn.fetchrow(
            "select status, sender_user_id = $2::uuid as is_sender, receiver_user_id = $2::uuid as is_receiver,"
            " sender_auth_expires_at, sender_auth_expires_at <= now() as auth_over"
            " from public.casting_sessions where id = $1 for update", sid, claims["sub"])
        # spec §9: 404 when not a participant, or when the sender's authorization expired (§10).
        if row is None or not (row["is_sender"] or row["is_receiver"]):
            raise ApiError(404, "not_found", "Session not found")
        if row["is_sender"] and row["auth_over"]:
            raise ApiError(404, "not_found", "Sender authorization expired; pair again")
        status = row["status"]
        if action == "end":
            if status not in ("waiting",) + LIVE:
                raise ApiError(409, "invalid_state", f"Session is already {status}")
            out = await conn.fetchrow(
                "update public.casting_sessions set status = 'disconnected', ended_at = now(), updated_at = now()"
                " where id = $1 returning status, sender_auth_expires_at", sid)
        elif status not in ("connecting", "connected"):
            raise ApiError(409, "invalid_state", f"Session is {status}")
        elif action == "connected":
            out = await conn.fetchrow(
                "update public.casting_sessions set status = 'connected', connected_at = coalesce(connected_at, now()),"
                " last_heartbeat_at = now(), updated_at = now() where id = $1 returning status, sender_auth_expires_at", sid)
        else:
            # spec §10: min(now + 2 h, (connected_at, else created_at) + 12 h).
            out = await conn.fetchrow(
                "update public.casting_sessions set last_heartbeat_at = now(), updated_at = now(),"
                " sender_auth_expires_at = least(now() + make_interval(secs => $2),"
                "   coalesce(connected_at, created_at) + make_interval(secs => $3))"
                " where id = $1 returning status, sender_auth_expires_at", sid, ctx.settings.sender_auth, ctx.settings.sender_auth_cap)
    resp = {"sessionId": str(sid), "status": out["status"]}
    if out["sender_auth_expires_at"] is not None:
        resp["senderAuthExpiresAt"] = iso_ms(out["sender_auth_expires_at"])
    return web.json_response(resp)


async def session_end(ctx, request: web.Request) -> web.Response:
    claims = caller(ctx, request)
    body = await json_body(request)
    sid = session_id_field(body)
    async with as_service(ctx) as conn:
        await lock_for_rows(conn, sid)
        row = await conn.fetchrow(
            "select status, sender_user_id, receiver_user_id = $2::uuid as mine"
            " from public.casting_sessions where id = $1 for update", sid, claims["sub"])
        if row is None or not row["mine"]:
            raise ApiError(404, "not_found", "Session not found")
        if row["status"] not in ("waiting",) + LIVE:
            raise ApiError(409, "invalid_state", f"Session is already {row['status']}")
        await conn.execute(
            "update public.casting_sessions set status = 'disconnected', ended_at = now(), updated_at = now() where id = $1", sid)
        await conn.execute("delete from private.pairing_secrets where session_id = $1", sid)
        if row["sender_user_id"] is not None:
            await insert_row(conn, sid, "receiver", "sender", "disconnect", {"reason": "receiver_ended"})
    return web.json_response({"sessionId": str(sid), "status": "disconnected"})


def setup(app: web.Application, ctx) -> None:
    """The session-state routes; the handlers above take the gateway's context, `endpoint` maps their errors."""
    app.router.add_post("/api/public/session-approve", endpoint(partial(session_approve, ctx)))
    app.router.add_post("/api/public/session-update", endpoint(partial(session_update, ctx)))
    app.router.add_post("/api/public/session-end", endpoint(partial(session_end, ctx)))
