"""/rest/v1/<table>: the PostgREST subset castd and the receiver use.

Every request runs in one transaction as the JWT's role with
`request.jwt.claims` set (db.as_claims), so Postgres RLS decides; errors are
mapped as PostgREST maps them (docs/contract.md, wire B). No token → role anon
(the apikey is the anon JWT)."""
from __future__ import annotations

import json
from functools import partial

import asyncpg
import jwt
from aiohttp import web

from .db import CLIENT_ROLES, as_claims
from .errors import check_apikey, json_response, rest_error
from .postgrest_query import QueryError, parse_query, quote_ident, select_sql, status_for_sqlstate

# Tables exposed through REST. casting_sessions is read-only for clients by
# grants; writes reach Postgres and fail there with 42501, as in production.
TABLES = ("signaling_messages", "casting_sessions")


async def load_columns(pool: asyncpg.Pool) -> dict[str, dict[str, str]]:
    rows = await pool.fetch(
        "select c.relname as table, a.attname as column, format_type(a.atttypid, a.atttypmod) as type"
        " from pg_attribute a join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace"
        " where n.nspname = 'public' and c.relname = any($1::text[]) and a.attnum > 0 and not a.attisdropped"
        " order by c.relname, a.attnum", list(TABLES))
    out: dict[str, dict[str, str]] = {t: {} for t in TABLES}
    for r in rows:
        out[r["table"]][r["column"]] = r["type"]
    return out


def jwt_error(code: str, message: str) -> web.Response:
    return rest_error(401, code, message, headers={"WWW-Authenticate": f'Bearer error="invalid_token", error_description="{message}"'})


def claims_of(ctx, request: web.Request):
    """(claims, None) or (None, error response), as PostgREST authenticates."""
    h = request.headers.get("Authorization")
    if h is None:
        token = request.headers.get("apikey") or request.query.get("apikey")
    elif h.lower().startswith("bearer "):
        token = h[7:].strip()
    else:
        return None, jwt_error("PGRST301", "JWT could not be decoded")
    try:
        claims = ctx.verify_jwt(token)
    except jwt.ExpiredSignatureError:
        return None, jwt_error("PGRST303", "JWT expired")
    except jwt.InvalidTokenError:
        return None, jwt_error("PGRST301", "JWT could not be decoded")
    if claims.get("role") not in CLIENT_ROLES:
        return None, rest_error(401, "PGRST301", "JWT could not be decoded")
    return claims, None


def pg_error(e: asyncpg.PostgresError, role: str) -> web.Response:
    code = e.sqlstate or "XX000"
    return rest_error(status_for_sqlstate(code, role), code, str(e.args[0]) if e.args else e.__class__.__name__,
                      getattr(e, "detail", None), getattr(e, "hint", None))


def prefer(request: web.Request) -> dict[str, str]:
    out = {}
    for h in request.headers.getall("Prefer", []):
        for part in h.split(","):
            k, _, v = part.strip().partition("=")
            out[k.strip()] = v.strip()
    return out


async def on_startup(ctx, columns, _app):
    columns.update(await load_columns(ctx.pool))


def table_of(request: web.Request):
    t = request.match_info["table"]
    if t not in TABLES:
        return None, rest_error(404, "PGRST205", f"Could not find the table 'public.{t}' in the schema cache")
    return t, None


def read_request(ctx, columns, request: web.Request):
    """What GET, PATCH and DELETE share: the apikey, the table, the caller's
    claims and the parsed query — or the PostgREST error response."""
    if (r := check_apikey(request, ctx.settings.anon_key)) is not None:
        return None, r
    table, err = table_of(request)
    if err:
        return None, err
    claims, err = claims_of(ctx, request)
    if err:
        return None, err
    try:
        return (table, claims, parse_query(list(request.query.items()), columns[table], table)), None
    except QueryError as e:
        return None, rest_error(e.status, e.code, e.message, e.details, e.hint)


async def get(ctx, columns, request: web.Request) -> web.Response:
    parsed, err = read_request(ctx, columns, request)
    if err:
        return err
    table, claims, q = parsed
    try:
        async with as_claims(ctx, claims, {"request.method": "GET", "request.path": request.path}) as conn:
            body, n = await conn.fetchrow(select_sql(table, q), *q.params)
            total = "*"
            if prefer(request).get("count") == "exact":
                where = (" where " + " and ".join(q.where)) if q.where else ""
                total = str(await conn.fetchval(f"select count(*) from public.{quote_ident(table)}{where}", *q.params))
    except asyncpg.PostgresError as e:
        return pg_error(e, claims["role"])
    first = q.offset or 0
    rng = f"{first}-{first + n - 1}/{total}" if n else f"*/{total}"
    if "application/vnd.pgrst.object" in request.headers.get("Accept", ""):
        # .single(): exactly one row, as an object (PostgREST's singular response)
        if n != 1:
            return rest_error(406, "PGRST116", "JSON object requested, multiple (or no) rows returned",
                              f"The result contains {n} rows")
        return web.Response(text=json.dumps(json.loads(body)[0]), status=200,
                            content_type="application/vnd.pgrst.object+json", headers={"Content-Range": rng})
    return web.Response(text=body, status=200, content_type="application/json",
                        headers={"Content-Range": rng})


async def post(ctx, columns, request: web.Request) -> web.Response:
    if (r := check_apikey(request, ctx.settings.anon_key)) is not None:
        return r
    table, err = table_of(request)
    if err:
        return err
    claims, err = claims_of(ctx, request)
    if err:
        return err
    raw = await request.read()
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return rest_error(400, "PGRST102", "Empty or invalid json")
    rows = body if isinstance(body, list) else [body]
    representation = prefer(request).get("return") == "representation"
    if isinstance(body, list) and not body:  # nothing to insert
        return json_response([], 201) if representation else web.Response(status=201)
    if not all(isinstance(r, dict) for r in rows):
        return rest_error(400, "PGRST102", "Empty or invalid json")
    if "columns" in request.query:
        # ?columns="a","b" (postgrest-py sends it for array inserts): keys may
        # differ between objects; a missing key inserts NULL, as PostgREST does.
        keys = [c.strip().strip('"') for c in request.query["columns"].split(",") if c.strip()]
    else:
        keys = list(rows[0].keys())
        if any(set(r.keys()) != set(keys) for r in rows[1:]):
            return rest_error(400, "PGRST102", "All object keys must match")
    cols = columns[table]
    for k in keys:
        if k not in cols:
            return rest_error(400, "PGRST204", f"Could not find the '{k}' column of '{table}' in the schema cache")
    col_sql = ", ".join(quote_ident(k) for k in keys)
    # As PostgREST: INSERT … SELECT … FROM json_populate_recordset(null::t, $1), and
    # RETURNING only when the client asked for the representation (then the
    # SELECT policies apply to the new rows too).
    sql = (f"insert into public.{quote_ident(table)} ({col_sql}) select {col_sql}"
           f" from json_populate_recordset(null::public.{quote_ident(table)}, $1::json)")
    if representation:
        sql = f"with _ins as ({sql} returning *) select coalesce(json_agg(_ins), '[]')::text from _ins"
    try:
        async with as_claims(ctx, claims, {"request.method": "POST", "request.path": request.path}) as conn:
            if representation:
                out = await conn.fetchval(sql, json.dumps(rows))
            else:
                await conn.execute(sql, json.dumps(rows))
    except asyncpg.PostgresError as e:
        return pg_error(e, claims["role"])
    if representation:
        return web.Response(text=out, status=201, content_type="application/json")
    return web.Response(status=201)


async def refuse_write(ctx, columns, request: web.Request) -> web.Response:
    """PATCH/DELETE: run the statement as the caller; grants and RLS refuse."""
    parsed, err = read_request(ctx, columns, request)
    if err:
        return err
    table, claims, q = parsed
    where = (" where " + " and ".join(q.where)) if q.where else ""
    try:
        async with as_claims(ctx, claims, {"request.method": request.method, "request.path": request.path}) as conn:
            if request.method == "DELETE":
                await conn.execute(f"delete from public.{quote_ident(table)}{where}", *q.params)
            else:
                raw = await request.read()
                try:
                    patch = json.loads(raw)
                except (ValueError, UnicodeDecodeError):
                    return rest_error(400, "PGRST102", "Empty or invalid json")
                if not isinstance(patch, dict) or not patch or any(k not in columns[table] for k in patch):
                    return rest_error(400, "PGRST102", "Empty or invalid json")
                n = len(q.params) + 1
                types = columns[table]
                # keys were checked against the column list, so they are safe as literals
                sets = ", ".join(
                    f"{quote_ident(k)} = (${n}::jsonb -> '{k}')" if types[k] == "jsonb"
                    else f"{quote_ident(k)} = (${n}::jsonb ->> '{k}')::{types[k]}"
                    for k in patch)
                await conn.execute(f"update public.{quote_ident(table)} set {sets}{where}",
                                   *q.params, json.dumps(patch))
    except asyncpg.PostgresError as e:
        return pg_error(e, claims["role"])
    return web.Response(status=204)


def setup(app: web.Application, ctx) -> None:
    """The /rest/v1/<table> routes; the table columns are read from Postgres once at startup."""
    columns: dict[str, dict[str, str]] = {}
    app.on_startup.append(partial(on_startup, ctx, columns))
    app.router.add_get("/rest/v1/{table}", partial(get, ctx, columns))
    app.router.add_post("/rest/v1/{table}", partial(post, ctx, columns))
    app.router.add_patch("/rest/v1/{table}", partial(refuse_write, ctx, columns))
    app.router.add_delete("/rest/v1/{table}", partial(refuse_write, ctx, columns))
