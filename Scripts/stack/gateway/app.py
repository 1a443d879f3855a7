"""Builds the gateway: one aiohttp application on one loopback port, plus the
STUN responder and the cleanup job."""
from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import logging

import asyncpg
from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from . import auth, cleanup, faults, ice, pairing, rest, sessions, static, stun
from .context import Context
from .db import as_service
from .errors import api_error
from .settings import Settings

log = logging.getLogger("gateway")

CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Expose-Headers": "Content-Range, Retry-After, X-Supabase-Api-Version",
}


class AccessLogger(AbstractAccessLogger):
    """One line per request, path only: query strings can carry secrets
    (the QR token of /pair?t=…)."""

    def log(self, request, response, time):
        self.logger.info("http method=%s path=%s status=%s ms=%.1f", request.method, request.path,
                         response.status, time * 1000)


@web.middleware
async def cors(request: web.Request, handler):
    # The receiver pages call the API and Supabase URLs, which are different
    # origins (as in production), so every answer allows any origin.
    if request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers:
        return web.Response(status=204, headers={
            **CORS_HEADERS,
            "Access-Control-Allow-Methods": "GET, POST, PATCH, DELETE, OPTIONS",
            "Access-Control-Allow-Headers": request.headers.get("Access-Control-Request-Headers", "*"),
            "Access-Control-Max-Age": "600",
        })
    try:
        resp = await handler(request)
    except (web.HTTPNotFound, web.HTTPMethodNotAllowed) as e:
        if not request.path.startswith("/api/public/"):
            e.headers.update(CORS_HEADERS)
            raise
        # spec §2: errors always have the {"error": {...}} shape on the API.
        code = "not_found" if isinstance(e, web.HTTPNotFound) else "method_not_allowed"
        resp = api_error(e.status, code, f"No such endpoint: {request.method} {request.path}")
    except web.HTTPException as e:
        e.headers.update(CORS_HEADERS)
        raise
    if not resp.prepared:
        resp.headers.update(CORS_HEADERS)
    return resp


async def write_db_settings(ctx: Context) -> None:
    """The trigger and the cleanup function read their limits from private.settings."""
    s = ctx.settings
    async with as_service(ctx) as conn:
        await conn.execute(
            "update private.settings set signaling_rate_limit = $1, signaling_rate_window_seconds = $2,"
            " heartbeat_silence_seconds = $3", s.signaling_rate_limit, s.signaling_rate_window, s.heartbeat_silence)


async def build_app(settings: Settings, pool: asyncpg.Pool | None = None) -> web.Application:
    if pool is None:
        pool = await asyncpg.create_pool(
            host=settings.pg_host, port=settings.pg_port, user=settings.pg_user, password=settings.pg_password,
            database=settings.pg_database, min_size=2, max_size=20, command_timeout=30)
    ctx = Context(settings=settings, pool=pool)
    app = web.Application(middlewares=[cors], client_max_size=4 * 1024 * 1024)
    app["ctx"] = ctx

    async def health(_request):
        await ctx.pool.fetchval("select 1")
        return web.json_response({"ok": True})

    app.router.add_get("/health", health)
    auth.setup(app, ctx)
    rest.setup(app, ctx)
    pairing.setup(app, ctx)
    sessions.setup(app, ctx)
    ice.setup(app, ctx)
    static.setup(app, ctx)
    hub_key = None
    if importlib.util.find_spec("gateway.realtime") is not None:
        rt = importlib.import_module("gateway.realtime")
        rt.setup(app, ctx)
        hub_key = rt.HUB_KEY
    else:
        log.warning("gateway.realtime is missing: no /realtime/v1/websocket")
    if settings.fault_hooks:
        faults.setup(app, hub_key)

    async def lifecycle(_app):
        await write_db_settings(ctx)
        stun_transport = await stun.start(settings.host, settings.stun_port)
        job = asyncio.create_task(cleanup.loop_forever(ctx))
        yield
        job.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await job
        stun_transport.close()
        await ctx.pool.close()

    app.cleanup_ctx.append(lifecycle)
    return app
