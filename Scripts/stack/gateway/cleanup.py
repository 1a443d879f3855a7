"""The cleanup job (docs/contract.md, "Endpoints and the backend's rules"): every `cleanup_interval`
seconds, private.cleanup_sessions() expires sessions whose pairing window
passed and disconnects those whose sender authorization passed or that went
silent while connected. It inserts no disconnect row (spec §9: "Cron")."""
from __future__ import annotations

import asyncio
import logging

from .db import as_service

log = logging.getLogger("gateway.cleanup")


async def run_once(ctx) -> list[tuple[str, str]]:
    async with as_service(ctx) as conn:
        rows = await conn.fetch("select session_id, new_status from private.cleanup_sessions()")
        # Old pairing attempts no longer count toward any window.
        await conn.execute(
            "delete from private.pairing_attempts where attempted_at < now() - make_interval(secs => $1)",
            ctx.settings.pair_failure_window * 2)
    changed = [(str(r["session_id"]), r["new_status"]) for r in rows]
    for sid, status in changed:
        log.info("cleanup session=%s status=%s", sid, status)
    return changed


async def loop_forever(ctx) -> None:
    while True:
        await asyncio.sleep(ctx.settings.cleanup_interval)
        try:
            await run_once(ctx)
        except Exception:  # noqa: BLE001 — keep the job alive; say what failed
            log.exception("cleanup failed")
