"""The Realtime endpoint of the local stack: ``/realtime/v1/websocket``.

A thin IO shell around ``realtime_protocol.SocketState`` (docs/contract.md, wire C):

* one dedicated LISTEN connection on channel ``castd_realtime`` (reconnects
  with backoff when PostgreSQL restarts); the 0900 migration's triggers
  notify only the keys of a changed row, because NOTIFY payloads stop at
  8000 bytes while signaling rows may carry 64 KB;
* one ``Connection`` per WebSocket, whose single worker task owns the
  Phoenix state: it takes client frames (queued by the reader), change
  notifications (queued by the listener) and deadlines (token expiry, idle
  socket) in order, reads each changed row once per interested channel under
  that channel's claims (so Postgres RLS decides who sees it), and is the only
  writer of the socket. Order per socket is therefore the order of events.

Nothing here may take the gateway down: every handler catches and logs.
Tokens never reach a log line.

Where this stand-in knowingly differs from hosted Supabase Realtime:

* DELETE subscriptions are accepted but never fire (the triggers cover
  INSERT and UPDATE, which is all the contract uses).
* ``commit_timestamp`` is the trigger's ``clock_timestamp()``, a moment
  before the commit, not the WAL commit time.
* broadcast and presence are not served; pushes for them get an ok reply.
* an invalid subscription (bad filter, unknown event) fails the join with an
  error reply instead of a later ``system`` error.
* the socket closes after ``realtime_idle_timeout`` seconds (default 60)
  without any client frame, as Phoenix's transport timeout does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from aiohttp import WSMsgType, web

from . import realtime_protocol as proto

log = logging.getLogger("gateway.realtime")

NOTIFY_CHANNEL = "castd_realtime"
DEFAULT_IDLE_TIMEOUT = 60.0  # seconds without any client frame (Phoenix's transport timeout)
INBOX_LIMIT = 10_000  # queued events per socket before a slow client is dropped
MAX_FRAME = 1 << 20
SEND_TIMEOUT = 10.0  # seconds one frame may wait for a client that does not read


def _idle_timeout(ctx: Any) -> float:
    # `devstack up --realtime-idle-timeout N` (Settings.realtime_idle_timeout).
    value = getattr(getattr(ctx, "settings", None), "realtime_idle_timeout", None)
    try:
        return float(value) if value is not None else DEFAULT_IDLE_TIMEOUT
    except ValueError:
        return DEFAULT_IDLE_TIMEOUT


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class Connection:
    """One WebSocket. ``inbox`` items: ("frame", text), ("change", Change), ("stop",)."""

    def __init__(self, hub: "Hub", ws: web.WebSocketResponse, vsn: str, peer: str, transport: Any = None):
        self.hub = hub
        self.ws = ws
        self.transport = transport
        self.peer = peer
        self.inbox: asyncio.Queue = asyncio.Queue(maxsize=INBOX_LIMIT)
        self.state = proto.SocketState(
            vsn=vsn, verify=hub.verify, anon_key=hub.anon_key,
            idle_timeout=hub.idle_timeout, last_seen=time.time())

    def offer(self, item: tuple) -> None:
        try:
            self.inbox.put_nowait(item)
        except asyncio.QueueFull:
            if self.state.close_reason is None:
                self.state.close_reason = "too many queued events"
                log.warning("realtime event=socket_overflow peer=%s", self.peer)

    async def run(self) -> None:
        try:
            while self.state.close_reason is None and not self.ws.closed:
                deadline = self.state.next_deadline()
                timeout = None if deadline is None else max(0.0, deadline - time.time())
                try:
                    item = await asyncio.wait_for(self.inbox.get(), timeout)
                except (asyncio.TimeoutError, TimeoutError):
                    await self._send(self.state.on_tick(time.time()))
                    continue
                kind = item[0]
                if kind == "stop":
                    return
                if kind == "frame":
                    await self._send(self.state.on_frame(item[1], time.time()))
                elif kind == "change":
                    await self._deliver(item[1])
                elif kind == "missed":
                    await self._send(self.state.on_changes_missed())
                # Expiry deadlines may have passed while a read was running.
                await self._send(self.state.on_tick(time.time()))
            aborted = self.transport is not None and self.transport.is_closing()
            if self.state.close_reason is not None and not self.ws.closed and not aborted:
                log.info("realtime event=socket_close peer=%s reason=%s", self.peer, self.state.close_reason.replace(" ", "_"))
                await self.ws.close(code=1000, message=self.state.close_reason.encode()[:120])
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("realtime event=worker_failed peer=%s", self.peer)
            if not self.ws.closed:
                await self.ws.close(code=1011, message=b"internal error")

    async def _send(self, frames: list[str]) -> None:
        for text in frames:
            if self.ws.closed:
                return
            try:
                await asyncio.wait_for(self.ws.send_str(text), SEND_TIMEOUT)
            except (asyncio.TimeoutError, TimeoutError):
                # A client that stopped reading must not hold its worker (and
                # its queue) forever: drop the connection without a handshake.
                log.warning("realtime event=send_timeout peer=%s", self.peer)
                self.state.close_reason = "client too slow"
                if self.transport is not None:
                    self.transport.abort()
                return
            except (ConnectionError, RuntimeError) as e:
                log.info("realtime event=send_failed peer=%s error=%s", self.peer, type(e).__name__)
                self.state.close_reason = "send failed"
                return

    async def _deliver(self, change: proto.Change) -> None:
        # Close channels whose token ran out while earlier reads were running,
        # so that no row is read under expired claims.
        await self._send(self.state.on_tick(time.time()))
        channels = self.state.interested(change)
        if not channels:
            return
        columns = await self.hub.columns(change.schema, change.table)
        if columns is None:
            return
        for channel in channels:
            # One read per subscriber, under its own role and claims: RLS decides.
            record = await self.hub.read_row(channel.claims, change, columns)
            if record is None:
                continue
            frame = self.state.change_frame(channel, change, columns, record)
            if frame is not None:
                await self._send([frame])


class Hub:
    def __init__(self, ctx: Any):
        self.ctx = ctx
        self.anon_key = ctx.settings.anon_key
        self.idle_timeout = _idle_timeout(ctx)
        self.connections: set[Connection] = set()
        self._columns: dict[tuple[str, str], list[dict]] = {}
        self._listener: asyncio.Task | None = None
        self._listening = asyncio.Event()  # set while LISTEN is active (tests and logs)

    def verify(self, token: str) -> dict:
        return self.ctx.verify_jwt(token)

    # ---- lifecycle -------------------------------------------------------

    async def start(self, app: web.Application) -> None:
        self._listener = asyncio.create_task(self._listen_forever(), name="realtime-listen")

    async def stop(self, app: web.Application) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.cancel()
            try:
                await listener
            except (asyncio.CancelledError, Exception):
                pass
        for conn in list(self.connections):
            conn.offer(("stop",))
            try:
                await conn.ws.close(code=1001, message=b"server shutting down")
            except Exception:
                pass

    async def _listen_forever(self) -> None:
        """Hold one pooled connection in LISTEN; on any failure (PostgreSQL
        restarted, pool not ready yet) retry with backoff up to 5 s."""
        backoff = 0.2
        had_listened = False
        while True:
            conn = None
            lost = asyncio.Event()
            try:
                pool = getattr(self.ctx, "pool", None)
                if pool is None:
                    raise RuntimeError("database pool not ready")
                conn = await pool.acquire()
                conn.add_termination_listener(lambda _c: lost.set())
                await conn.add_listener(NOTIFY_CHANNEL, self._on_notify)
                self._columns.clear()  # the schema may have changed across a restart
                self._listening.set()
                log.info("realtime event=listening channel=%s", NOTIFY_CHANNEL)
                if had_listened:
                    # Changes made while LISTEN was down were never announced: make every
                    # subscriber rejoin (and backfill) rather than miss them silently.
                    for c in list(self.connections):
                        c.offer(("missed",))
                    log.info("realtime event=resubscribe_all sockets=%d", len(self.connections))
                had_listened = True
                backoff = 0.2
                while not lost.is_set() and not conn.is_closed():
                    try:
                        await asyncio.wait_for(lost.wait(), 5.0)
                    except (asyncio.TimeoutError, TimeoutError):
                        # A cheap liveness probe: a half-open TCP connection
                        # would otherwise never report the restart.
                        await asyncio.wait_for(conn.execute("select 1"), 5.0)
                raise ConnectionError("LISTEN connection lost")
            except asyncio.CancelledError:
                raise
            except Exception as e:
                if self._listening.is_set():
                    log.warning("realtime event=listen_lost error=%s", type(e).__name__)
                self._listening.clear()
            finally:
                if conn is not None:
                    await self._drop(conn)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)

    async def _drop(self, conn: Any) -> None:
        try:
            if conn.is_closed():
                conn.terminate()
            else:
                await conn.remove_listener(NOTIFY_CHANNEL, self._on_notify)
        except Exception:
            pass
        try:
            await asyncio.wait_for(self.ctx.pool.release(conn), 5.0)
        except Exception:
            try:
                conn.terminate()
            except Exception:
                pass

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        try:
            change = proto.parse_change(payload)
        except ValueError as e:
            log.warning("realtime event=bad_notification error=%s", e)
            return
        for conn in list(self.connections):
            if conn.state.interested(change):
                conn.offer(("change", change))

    # ---- database --------------------------------------------------------

    async def columns(self, schema: str, table: str) -> list[dict] | None:
        key = (schema, table)
        if key not in self._columns:
            try:
                rows = await self.ctx.pool.fetch(
                    "select a.attname::text as name, t.typname::text as type"
                    " from pg_catalog.pg_attribute a"
                    " join pg_catalog.pg_class c on c.oid = a.attrelid"
                    " join pg_catalog.pg_namespace n on n.oid = c.relnamespace"
                    " join pg_catalog.pg_type t on t.oid = a.atttypid"
                    " where n.nspname = $1 and c.relname = $2 and a.attnum > 0 and not a.attisdropped"
                    " order by a.attnum", schema, table)
            except Exception as e:
                log.warning("realtime event=columns_failed table=%s.%s error=%s", schema, table, type(e).__name__)
                return None
            self._columns[key] = [{"name": r["name"], "type": r["type"]} for r in rows]
        return self._columns[key]

    async def read_row(self, claims: dict, change: proto.Change, columns: list[dict]) -> dict | None:
        """The row as PostgREST renders it (``to_json``, column order: uuid as string,
        timestamptz ISO-8601, jsonb nested), or None when RLS hides it."""
        from . import db  # the gateway's helper: SET LOCAL ROLE + request.jwt.claims

        id_type = next((c["type"] for c in columns if c["name"] == "id"), None)
        if id_type is None:
            return None
        sql = (f"select to_json(t)::text from {_quote_ident(change.schema)}.{_quote_ident(change.table)} t"
               f" where t.id = $1::text::{_quote_ident(id_type)}")
        try:
            result = await db.read_as_user(self.ctx, claims, sql, str(change.id))
        except Exception as e:
            log.warning("realtime event=read_failed table=%s.%s error=%s", change.schema, change.table, type(e).__name__)
            return None
        text = _first_value(result)
        if text is None:
            return None
        return json.loads(text) if isinstance(text, str) else text

    # ---- the endpoint ----------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        apikey = request.query.get("apikey") or request.headers.get("apikey")
        if apikey != self.anon_key:
            return web.json_response({"message": "Invalid API key"}, status=401)
        vsn = request.query.get("vsn", proto.VSN_1)
        if vsn not in proto.SUPPORTED_VSNS:
            return web.json_response({"message": f"unsupported vsn {vsn}"}, status=400)
        ws = web.WebSocketResponse(max_msg_size=MAX_FRAME, autoping=True)
        try:
            await ws.prepare(request)
        except Exception as e:  # not an upgrade request, or the client vanished
            log.info("realtime event=upgrade_failed error=%s", type(e).__name__)
            raise
        peer = request.headers.get("cf-connecting-ip") or (request.remote or "?")
        conn = Connection(self, ws, vsn, peer, request.transport)
        self.connections.add(conn)
        worker = asyncio.create_task(conn.run(), name="realtime-socket")
        log.info("realtime event=socket_open vsn=%s sockets=%d", vsn, len(self.connections))
        try:
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    conn.offer(("frame", msg.data))
                elif msg.type == WSMsgType.BINARY:
                    log.info("realtime event=binary_frame_ignored bytes=%d", len(msg.data))
                elif msg.type == WSMsgType.ERROR:
                    break
                if worker.done():
                    break
        except Exception:
            log.exception("realtime event=reader_failed")
        finally:
            self.connections.discard(conn)
            conn.state.close_reason = conn.state.close_reason or "client gone"
            if not worker.done():
                worker.cancel()
            try:
                await worker
            except (asyncio.CancelledError, Exception):
                pass
            if not ws.closed:
                await ws.close()
            log.info("realtime event=socket_closed sockets=%d", len(self.connections))
        return ws


def _first_value(result: Any) -> Any:
    """``read_as_user`` may hand back rows (list of records), one record, or a value."""
    if result is None:
        return None
    if isinstance(result, (list, tuple)) and not hasattr(result, "keys"):
        if not result:
            return None
        result = result[0]
    if hasattr(result, "keys") or isinstance(result, (list, tuple)):
        try:
            return result[0]
        except (IndexError, KeyError):
            return None
    return result


HUB_KEY = web.AppKey("castd_realtime_hub", Hub)


def setup(app: web.Application, ctx: Any) -> None:
    hub = Hub(ctx)
    app[HUB_KEY] = hub
    app.router.add_get("/realtime/v1/websocket", hub.handle)
    app.on_startup.append(hub.start)
    # on_shutdown runs before on_cleanup, where the gateway closes its pool:
    # asyncpg's Pool.close() waits for every acquired connection, so the LISTEN
    # connection must be back (and the sockets closed) by then. on_cleanup
    # repeats it for an app that is cleaned up without a shutdown.
    app.on_shutdown.append(hub.stop)
    app.on_cleanup.append(hub.stop)
