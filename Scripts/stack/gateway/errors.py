"""The three error shapes the gateway speaks, one per API family:

- /api/public:   {"error": {"code", "message"}}          (spec §2)
- /rest/v1:      {"code", "message", "details", "hint"}   (PostgREST, docs/contract.md wire B)
- /auth/v1:      {"code", "error_code", "message"}        (GoTrue with X-Supabase-Api-Version)
"""
from __future__ import annotations

import json

from aiohttp import web

AUTH_API_VERSION = "2024-01-01"


def json_response(body, status: int = 200, headers: dict | None = None) -> web.Response:
    return web.Response(
        text=json.dumps(body, separators=(",", ":")),
        status=status,
        content_type="application/json",
        headers=headers,
    )


def api_error(status: int, code: str, message: str, headers: dict | None = None) -> web.Response:
    return json_response({"error": {"code": code, "message": message}}, status, headers)


def rest_error(status: int, code: str, message: str, details=None, hint=None,
               headers: dict | None = None) -> web.Response:
    return json_response({"code": code, "details": details, "hint": hint, "message": message}, status, headers)


def auth_error(status: int, code: str, message: str) -> web.Response:
    return json_response(
        {"code": code, "error_code": code, "message": message, "msg": message},
        status,
        {"X-Supabase-Api-Version": AUTH_API_VERSION},
    )


def kong_no_apikey() -> web.Response:
    """What Supabase's API gateway answers when the `apikey` is missing or wrong."""
    return json_response(
        {"message": "No API key found in request", "hint": "No `apikey` request header or url param was found."},
        401,
    )


def kong_bad_apikey() -> web.Response:
    return json_response({"message": "Invalid API key", "hint": "Double check your Supabase `anon` or `service_role` API key."}, 401)


def apikey_of(request: web.Request) -> str | None:
    return request.headers.get("apikey") or request.query.get("apikey")


def check_apikey(request: web.Request, anon_key: str) -> web.Response | None:
    """None when the request carries the project's publishable key."""
    key = apikey_of(request)
    if not key:
        return kong_no_apikey()
    if key != anon_key:
        return kong_bad_apikey()
    return None
