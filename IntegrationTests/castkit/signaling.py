"""Signaling over the local stack in Python: Auth, REST, /api/public and Realtime.

Reusable by both roles of spec §5–§11:

    async with StackClient(StackConfig.from_env()) as c:      # anonymous sign-in
        await c.api("session-pair", {"pin": "482913"})
        sig = SessionSignals(c, session_id, role="sender")
        await sig.start()                                    # subscribe, then backfill
        row = await sig.wait_row(lambda r: r["message_type"] == "join_approved")
        await sig.send("offer", {...})

Written against docs/contract.md, wire A–C (headers, refresh rotation, Phoenix vsn 1.0.0,
postgres_changes) so it speaks what castd and the pages speak. Tokens never
appear in reprs or exception texts.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import os
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import urlencode

import aiohttp
from websockets.asyncio.client import connect as ws_connect

API_VERSION = "2024-01-01"


@dataclass(frozen=True)
class StackConfig:
    api_url: str
    supabase_url: str
    supabase_key: str

    @classmethod
    def from_env(cls, env: dict | None = None) -> "StackConfig":
        e = env if env is not None else os.environ
        return cls(e["CASTD_API_URL"].rstrip("/"), e["CASTD_SUPABASE_URL"].rstrip("/"), e["CASTD_SUPABASE_KEY"])

    @property
    def realtime_url(self) -> str:
        base = self.supabase_url.replace("http://", "ws://", 1).replace("https://", "wss://", 1)
        return f"{base}/realtime/v1/websocket?" + urlencode({"apikey": self.supabase_key, "vsn": "1.0.0"})


class ApiError(Exception):
    """An /api/public, REST or Auth error: HTTP status and the stable code."""

    def __init__(self, status: int, code: str, message: str, retry_after: float | None = None):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.retry_after = status, code, message, retry_after


class StackClient:
    """One anonymous identity with refresh rotation, plus REST and API helpers."""

    def __init__(self, config: StackConfig, *, forwarded_for: str | None = None):
        self.config = config
        self.forwarded_for = forwarded_for
        self.http: aiohttp.ClientSession | None = None
        self._session: dict | None = None
        self._refresh_lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"StackClient(user={self.user_id})"

    async def __aenter__(self) -> "StackClient":
        await self.sign_in()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        if self.http:
            await self.http.close()
            self.http = None

    @property
    def user_id(self) -> str | None:
        return (self._session or {}).get("user", {}).get("id")

    def _headers(self, bearer: str | None = None) -> dict:
        h = {"apikey": self.config.supabase_key, "Content-Type": "application/json",
             "X-Supabase-Api-Version": API_VERSION,
             "Authorization": f"Bearer {bearer or self.config.supabase_key}"}
        if self.forwarded_for:
            h["x-forwarded-for"] = self.forwarded_for
        return h

    async def _auth_post(self, path: str, body: dict) -> dict:
        async with self.http.post(self.config.supabase_url + path, json=body, headers=self._headers()) as r:
            data = await r.json(content_type=None)
            if r.status != 200:
                code = data.get("code") if isinstance(data.get("code"), str) else data.get("error_code", f"http_{r.status}")
                raise ApiError(r.status, code, data.get("message") or data.get("msg") or "auth failed")
        if "expires_at" not in data and "expires_in" in data:
            data["expires_at"] = int(time.time()) + int(data["expires_in"])
        return data

    async def sign_in(self) -> str:
        """Anonymous sign-in (POST /auth/v1/signup); returns the user id."""
        if self.http is None:
            self.http = aiohttp.ClientSession()
        self._session = await self._auth_post(
            "/auth/v1/signup", {"data": {}, "gotrue_meta_security": {"captcha_token": None}})
        return self.user_id

    async def refresh(self) -> None:
        async with self._refresh_lock:
            self._session = await self._auth_post(
                "/auth/v1/token?grant_type=refresh_token", {"refresh_token": self._session["refresh_token"]})

    async def token(self) -> str:
        """A valid access token, refreshed when less than a third of its life (≤ 90 s) is left."""
        s = self._session
        lifetime = float(s.get("expires_in", 3600))
        if s["expires_at"] - time.time() < min(90.0, lifetime / 3):
            await self.refresh()
        return self._session["access_token"]

    async def _json(self, r: aiohttp.ClientResponse) -> Any:
        text = await r.text()
        return json.loads(text) if text else None

    async def api(self, name: str, body: dict | None = None) -> dict:
        """POST /api/public/<name> (GET when body is None); raises ApiError on failure."""
        url = f"{self.config.api_url}/api/public/{name}"
        headers = self._headers(await self.token())
        method = "GET" if body is None else "POST"
        async with self.http.request(method, url, json=body, headers=headers) as r:
            data = await self._json(r)
            if r.status != 200:
                err = (data or {}).get("error", {}) if isinstance(data, dict) else {}
                ra = r.headers.get("Retry-After")
                raise ApiError(r.status, err.get("code", f"http_{r.status}"), err.get("message", ""),
                               float(ra) if ra else None)
            return data

    async def insert(self, row: dict) -> None:
        """POST /rest/v1/signaling_messages with Prefer: return=minimal (docs/contract.md, "Endpoints and the backend's rules")."""
        headers = self._headers(await self.token()) | {"Prefer": "return=minimal"}
        async with self.http.post(f"{self.config.supabase_url}/rest/v1/signaling_messages",
                                  json=row, headers=headers) as r:
            if r.status != 201:
                data = await self._json(r) or {}
                raise ApiError(r.status, data.get("code", f"http_{r.status}"), data.get("message", ""))

    async def session_status(self, session_id: str) -> str:
        """The session row's status, read through REST (RLS: the receiver or the sender of it)."""
        q = urlencode({"select": "status", "id": f"eq.{session_id}"})
        async with self.http.get(f"{self.config.supabase_url}/rest/v1/casting_sessions?{q}",
                                 headers=self._headers(await self.token())) as r:
            data = await self._json(r)
            assert r.status == 200 and len(data) == 1, (r.status, data)
            return data[0]["status"]

    async def select(self, session_id: str, recipient_role: str) -> list[dict]:
        q = urlencode({"select": "*", "session_id": f"eq.{session_id}",
                       "recipient_role": f"eq.{recipient_role}", "order": "created_at.asc"})
        async with self.http.get(f"{self.config.supabase_url}/rest/v1/signaling_messages?{q}",
                                 headers=self._headers(await self.token())) as r:
            data = await self._json(r)
            if r.status != 200:
                raise ApiError(r.status, (data or {}).get("code", f"http_{r.status}"), (data or {}).get("message", ""))
            return data


class RealtimeChannel:
    """One Phoenix channel (vsn 1.0.0) with postgres_changes, reconnecting on loss.

    on_change(data) gets each change's `data` object; on_subscribed() runs after
    every successful (re)join, which is where callers backfill.
    """

    HEARTBEAT_S = 25.0

    def __init__(self, client: StackClient, name: str, changes: list[dict],
                 on_change: Callable[[dict], None], on_subscribed: Callable[[], Any]):
        self.client = client
        self.topic = f"realtime:{name}"
        self.changes = changes
        self.on_change = on_change
        self.on_subscribed = on_subscribed
        self.refs = itertools.count(1)
        self.ws = None
        self.task: asyncio.Task | None = None
        self.subscribed = asyncio.Event()
        self.closing = False
        self.joins = 0
        self.token_pushes = 0

    async def start(self, timeout: float = 10.0) -> None:
        self.task = asyncio.create_task(self._run())
        await asyncio.wait_for(self.subscribed.wait(), timeout)

    async def close(self) -> None:
        self.closing = True
        if self.ws is not None:
            try:
                await self.ws.send(json.dumps({"topic": self.topic, "event": "phx_leave", "payload": {},
                                               "ref": str(next(self.refs)), "join_ref": None}))
            except Exception:
                pass
            await self.ws.close()
        if self.task:
            self.task.cancel()
            try:
                await self.task
            except (asyncio.CancelledError, Exception):
                pass

    async def _run(self) -> None:
        backoff = [1, 2, 5, 10]
        tries = 0
        while not self.closing:
            try:
                await self._session()
                tries = 0
            except asyncio.CancelledError:
                raise
            except Exception:
                pass
            if self.closing:
                return
            self.subscribed.clear()
            await asyncio.sleep(backoff[min(tries, len(backoff) - 1)])
            tries += 1

    async def _session(self) -> None:
        async with ws_connect(self.client.config.realtime_url, ping_interval=None, max_size=None) as ws:
            self.ws = ws
            token = await self.client.token()
            join_ref = str(next(self.refs))
            await ws.send(json.dumps({
                "topic": self.topic, "event": "phx_join", "ref": join_ref, "join_ref": join_ref,
                "payload": {"config": {"broadcast": {"ack": False, "self": False},
                                       "presence": {"key": "", "enabled": False},
                                       "postgres_changes": self.changes, "private": False},
                            "access_token": token}}))
            beat = asyncio.create_task(self._heartbeat(ws))
            try:
                async for raw in ws:
                    msg = json.loads(raw)
                    ev, p = msg.get("event"), msg.get("payload") or {}
                    if msg.get("topic") != self.topic:
                        continue
                    if ev == "phx_reply" and msg.get("ref") == join_ref and p.get("status") != "ok":
                        raise RuntimeError(f"join refused: {p.get('response')}")
                    if ev == "system" and p.get("extension") == "postgres_changes" and p.get("status") == "ok":
                        if not self.subscribed.is_set():
                            self.joins += 1
                            self.subscribed.set()
                            res = self.on_subscribed()
                            if asyncio.iscoroutine(res):
                                asyncio.create_task(res)
                    elif ev == "postgres_changes" and p.get("data"):
                        self.on_change(p["data"])
                    elif ev in ("phx_close", "phx_error"):
                        return
            finally:
                beat.cancel()
                self.ws = None

    async def _heartbeat(self, ws) -> None:
        """Heartbeat every 25 s; a refreshed token is pushed to the channel within a second."""
        last_token = await self.client.token()
        next_beat = time.monotonic() + self.HEARTBEAT_S
        while True:
            await asyncio.sleep(1.0)
            try:
                tok = await self.client.token()
                if tok != last_token:
                    await ws.send(json.dumps({"topic": self.topic, "event": "access_token",
                                              "payload": {"access_token": tok}, "ref": None, "join_ref": None}))
                    self.token_pushes += 1
                    last_token = tok
                if time.monotonic() >= next_beat:
                    next_beat += self.HEARTBEAT_S
                    await ws.send(json.dumps({"topic": "phoenix", "event": "heartbeat", "payload": {},
                                              "ref": str(next(self.refs)), "join_ref": None}))
            except Exception:
                return


class SessionSignals:
    """One side of a session's signaling: subscribe, then backfill, de-duplicated by id (spec §5).

    role is "sender" or "receiver": rows addressed to it are collected in order
    of arrival; rows it sends go to the other role. Session status updates are
    collected too.
    """

    def __init__(self, client: StackClient, session_id: str, role: str):
        assert role in ("sender", "receiver")
        self.client = client
        self.session_id = session_id
        self.role = role
        self.peer = "receiver" if role == "sender" else "sender"
        self.rows: list[dict] = []
        self.seen: set[str] = set()
        self.statuses: list[str] = []
        self.changed = asyncio.Condition()
        self.channel = RealtimeChannel(client, f"{role}-{session_id}", [
            {"event": "UPDATE", "schema": "public", "table": "casting_sessions", "filter": f"id=eq.{session_id}"},
            {"event": "INSERT", "schema": "public", "table": "signaling_messages", "filter": f"session_id=eq.{session_id}"},
        ], self._change, self._backfill)
        self.listeners: list[Callable[[dict], Any]] = []

    async def start(self) -> None:
        await self.channel.start()
        await self._backfill()

    async def close(self) -> None:
        await self.channel.close()

    def on_row(self, fn: Callable[[dict], Any]) -> None:
        """fn(row) for each new row addressed to this role (sync or async)."""
        self.listeners.append(fn)

    def _change(self, data: dict) -> None:
        if data.get("table") == "casting_sessions":
            status = (data.get("record") or {}).get("status")
            if status:
                self.statuses.append(status)
                asyncio.create_task(self._notify())
        elif data.get("table") == "signaling_messages" and data.get("type") == "INSERT":
            self._add(data.get("record") or {})

    def _add(self, row: dict) -> None:
        if row.get("recipient_role") != self.role or row.get("id") in self.seen:
            return
        self.seen.add(row["id"])
        self.rows.append(row)
        for fn in self.listeners:
            res = fn(row)
            if asyncio.iscoroutine(res):
                asyncio.create_task(res)
        asyncio.create_task(self._notify())

    async def _notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    async def _backfill(self) -> None:
        for row in await self.client.select(self.session_id, self.role):
            self._add(row)

    async def wait_row(self, pred: Callable[[dict], bool], timeout: float = 10.0) -> dict:
        async def find():
            async with self.changed:
                while True:
                    for r in self.rows:
                        if pred(r):
                            return r
                    await self.changed.wait()
        return await asyncio.wait_for(find(), timeout)

    async def wait_status(self, status: str, timeout: float = 10.0) -> None:
        async def find():
            async with self.changed:
                while status not in self.statuses:
                    await self.changed.wait()
        await asyncio.wait_for(find(), timeout)

    async def send(self, message_type: str, payload: dict) -> None:
        await self.client.insert({"session_id": self.session_id, "sender_role": self.role,
                                  "recipient_role": self.peer, "message_type": message_type,
                                  "payload": payload})


def new_negotiation_id() -> str:
    return str(uuid.uuid4())
