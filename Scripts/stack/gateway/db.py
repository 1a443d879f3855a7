"""Transactions under a caller's role and claims, as PostgREST runs them
(docs/contract.md, wire B): one transaction, `set_config('role', …, true)`,
`set_config('request.jwt.claims', <json>, true)` (plus the legacy
`request.jwt.claim.sub`/`.role`), then the statement. Postgres RLS decides."""
from __future__ import annotations

import contextlib
import json
from typing import AsyncIterator

import asyncpg

# Roles a token may name. Anything else is refused before reaching Postgres
# (PostgREST answers such a token with 401 too: the role must exist and be granted).
CLIENT_ROLES = ("anon", "authenticated", "service_role")


@contextlib.asynccontextmanager
async def as_claims(ctx, claims: dict, extra: dict | None = None) -> AsyncIterator[asyncpg.Connection]:
    """A connection inside a transaction that runs as `claims['role']` with
    the request settings PostgREST sets. `extra` adds settings such as
    request.method / request.path."""
    role = claims.get("role", "anon")
    if role not in CLIENT_ROLES:
        raise ValueError(f"role {role!r} is not a client role")
    async with ctx.pool.acquire() as conn:
        async with conn.transaction():
            await conn.execute(
                "select set_config('role', $1, true), set_config('request.jwt.claims', $2, true),"
                " set_config('request.jwt.claim.sub', $3, true), set_config('request.jwt.claim.role', $1, true)",
                role, json.dumps(claims), str(claims.get("sub") or ""),
            )
            for k, v in (extra or {}).items():
                await conn.execute("select set_config($1, $2, true)", k, v)
            yield conn


@contextlib.asynccontextmanager
async def as_service(ctx) -> AsyncIterator[asyncpg.Connection]:
    """The endpoints' own rights (the hosted app's service-role client)."""
    async with as_claims(ctx, {"role": "service_role"}) as conn:
        yield conn


async def read_as_user(ctx, claims: dict, sql: str, *args) -> list[asyncpg.Record]:
    """Run one query under the user's role and claims, so RLS decides what it
    returns. Used by the REST layer and by realtime to re-read a changed row."""
    async with as_claims(ctx, claims) as conn:
        return await conn.fetch(sql, *args)
