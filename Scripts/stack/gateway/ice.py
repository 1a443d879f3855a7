"""/api/public/ice-config (spec §8): the stack's own STUN responder, plus,
with --turn, TURN credentials in the TURN REST scheme that coturn's
`use-auth-secret` accepts: username "<expiry unix time>:<uid>", credential
base64(HMAC-SHA1(shared secret, username))."""
from __future__ import annotations

import base64
import hashlib
import hmac
import time

from aiohttp import web

from .public_common import caller, endpoint


def turn_credentials(secret: str, user_id: str, expiry: int) -> tuple[str, str]:
    username = f"{expiry}:{user_id}"
    credential = base64.b64encode(hmac.new(secret.encode(), username.encode(), hashlib.sha1).digest()).decode()
    return username, credential


def ice_config(settings, user_id: str, now: int) -> dict:
    servers = [{"urls": [f"stun:127.0.0.1:{settings.stun_port}"]}]
    if settings.turn_urls:
        username, credential = turn_credentials(settings.turn_secret, user_id, now + settings.turn_credential_ttl)
        servers.append({"urls": list(settings.turn_urls), "username": username, "credential": credential})
    return {"iceServers": servers, "turnConfigured": bool(settings.turn_urls)}


def setup(app: web.Application, ctx) -> None:
    @endpoint
    async def get_ice_config(request: web.Request) -> web.Response:
        claims = caller(ctx, request)
        return web.json_response(ice_config(ctx.settings, claims["sub"], int(time.time())))

    app.router.add_get("/api/public/ice-config", get_ice_config)
