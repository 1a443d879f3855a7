"""The receiver pages (files under Scripts/stack/web/, written by the pages
work) and the generated /web/config.js that tells them where the stack is."""
from __future__ import annotations

import json
import mimetypes
from pathlib import Path

from aiohttp import web

PAIR_PAGE = """<!doctype html><meta charset="utf-8"><title>iPadCast</title>
<p>Open this in the iPadCast iPad app (or: <code>castd pair '&lt;this URL&gt;'</code>).</p>
"""


def setup(app: web.Application, ctx) -> None:
    s = ctx.settings
    root = Path(s.web_dir).resolve() if s.web_dir else Path(__file__).resolve().parent.parent / "web"

    def serve(rel: str) -> web.StreamResponse:
        path = (root / rel).resolve()
        if root not in path.parents and path != root:
            return web.Response(status=404, text="not found\n")
        if not path.is_file():
            return web.Response(status=404, text=f"{rel}: no such page in Scripts/stack/web (not built yet?)\n")
        ctype = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        if path.suffix in (".js", ".mjs"):
            ctype = "text/javascript"
        return web.FileResponse(path, headers={"Content-Type": ctype + ("; charset=utf-8" if ctype.startswith("text/") else ""),
                                               "Cache-Control": "no-store"})

    async def dashboard(_request):
        return serve("dashboard.html")

    async def viewer(_request):
        return serve("viewer.html")

    async def config_js(_request):
        cfg = {"apiUrl": s.api_url, "supabaseUrl": s.supabase_url, "supabaseKey": s.anon_key}
        return web.Response(text=f"window.CASTD_CONFIG = {json.dumps(cfg)};\n", content_type="text/javascript",
                            headers={"Cache-Control": "no-store"})

    async def web_file(request):
        return serve(request.match_info["path"])

    async def pair(_request):
        return web.Response(text=PAIR_PAGE, content_type="text/html")

    app.router.add_get("/dashboard", dashboard)
    app.router.add_get("/viewer/{id}", viewer)
    app.router.add_get("/web/config.js", config_js)
    app.router.add_get("/web/{path:.+}", web_file)
    app.router.add_get("/pair", pair)
