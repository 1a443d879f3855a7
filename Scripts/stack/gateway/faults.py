"""Fault hooks for Scripts/faults (off unless the gateway runs with --fault-hooks 1).

Loopback callers only:
  POST /admin/faults/realtime-drop            abort every Realtime socket's TCP connection
                                              (no close frame, as a network drop); → {"dropped": n}
  POST /admin/faults/errors {"status": 500, "seconds": 30, "prefixes": ["/rest/v1", "/api/public"]}
                                              answer matching requests with that status (a JSON
                                              error body) until the time is up; seconds 0 stops
"""
from __future__ import annotations

import ipaddress
import logging
import time

from aiohttp import web

log = logging.getLogger("gateway")
STATE = web.AppKey("castd_fault_state", dict)


def _loopback(request: web.Request) -> bool:
    try:
        return ipaddress.ip_address(request.remote or "").is_loopback
    except ValueError:
        return False


@web.middleware
async def injected_errors(request: web.Request, handler):
    st = request.app[STATE]
    if time.monotonic() < st["until"] and request.path.startswith(tuple(st["prefixes"])):
        st["served"] += 1
        return web.json_response({"code": "injected_fault", "message": "fault injected by Scripts/faults",
                                  "error": {"code": "injected_fault", "message": "fault injected by Scripts/faults"}},
                                 status=st["status"])
    return await handler(request)


def setup(app: web.Application, realtime_hub_key) -> None:
    app[STATE] = {"until": 0.0, "status": 500, "prefixes": [], "served": 0}
    app.middlewares.append(injected_errors)

    async def realtime_drop(request: web.Request) -> web.Response:
        if not _loopback(request):
            raise web.HTTPForbidden()
        hub = request.app.get(realtime_hub_key) if realtime_hub_key else None
        conns = list(hub.connections) if hub else []
        for c in conns:
            if c.transport is not None:
                c.transport.abort()
        log.info("faults event=realtime_drop sockets=%d", len(conns))
        return web.json_response({"dropped": len(conns)})

    async def errors(request: web.Request) -> web.Response:
        if not _loopback(request):
            raise web.HTTPForbidden()
        body = await request.json()
        st = request.app[STATE]
        st.update(status=int(body.get("status", 500)), prefixes=list(body.get("prefixes", ["/rest/v1", "/api/public"])),
                  until=time.monotonic() + float(body.get("seconds", 30)), served=0)
        log.info("faults event=errors status=%d seconds=%s prefixes=%s", st["status"], body.get("seconds"), st["prefixes"])
        return web.json_response({"ok": True})

    async def status(request: web.Request) -> web.Response:
        if not _loopback(request):
            raise web.HTTPForbidden()
        st = request.app[STATE]
        return web.json_response({"served": st["served"], "active": time.monotonic() < st["until"]})

    app.router.add_post("/admin/faults/realtime-drop", realtime_drop)
    app.router.add_post("/admin/faults/errors", errors)
    app.router.add_get("/admin/faults/status", status)
