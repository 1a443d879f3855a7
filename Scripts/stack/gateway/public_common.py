"""What every /api/public endpoint shares (spec §2): the Bearer token
decides the caller's uid (any uid in a body is ignored), JSON bodies, and the
error shape {"error": {"code", "message"}}."""
from __future__ import annotations

import json
import uuid

import jwt
from aiohttp import web

from .errors import api_error


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers

    def response(self) -> web.Response:
        return api_error(self.status, self.code, self.message, self.headers)


def caller(ctx, request: web.Request) -> dict:
    """Claims of the signed-in user; 401 unauthorized otherwise (also for the
    anon key: a user is required)."""
    h = request.headers.get("Authorization", "")
    if not h.lower().startswith("bearer "):
        raise ApiError(401, "unauthorized", "Missing bearer token")
    try:
        claims = ctx.verify_jwt(h[7:].strip())
    except jwt.ExpiredSignatureError:
        raise ApiError(401, "unauthorized", "Token expired") from None
    except jwt.InvalidTokenError:
        raise ApiError(401, "unauthorized", "Invalid token") from None
    if claims.get("role") != "authenticated" or not claims.get("sub"):
        raise ApiError(401, "unauthorized", "A signed-in user is required")
    try:
        uuid.UUID(str(claims["sub"]))
    except ValueError:
        raise ApiError(401, "unauthorized", "Invalid token") from None
    return claims


async def json_body(request: web.Request) -> dict:
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "invalid_request", "Body is not valid JSON") from None
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_request", "Body must be a JSON object")
    return body


def session_id_field(body: dict, name: str = "sessionId") -> uuid.UUID:
    v = body.get(name)
    if not isinstance(v, str):
        raise ApiError(400, "invalid_request", f"{name} is required")
    try:
        return uuid.UUID(v)
    except ValueError:
        raise ApiError(400, "invalid_request", f"{name} is not a UUID") from None


def client_ip(request: web.Request) -> str:
    """spec §4: Cloudflare's cf-connecting-ip, then the first x-forwarded-for
    entry (spoofable; the per-user limit still applies), then the peer."""
    cf = request.headers.get("cf-connecting-ip", "").strip()
    if cf:
        return cf
    xff = request.headers.get("x-forwarded-for", "")
    first = xff.split(",")[0].strip()
    if first:
        return first
    return request.remote or "unknown"


def endpoint(handler):
    """Map ApiError to its response and anything unexpected to 500 server_error."""
    async def wrapped(request: web.Request) -> web.Response:
        try:
            return await handler(request)
        except ApiError as e:
            return e.response()
        except web.HTTPException:
            raise
        except Exception:  # noqa: BLE001 — the contract's catch-all
            request.app.logger.exception("api: %s failed", request.path)
            return api_error(500, "server_error", "Internal error")
    return wrapped
