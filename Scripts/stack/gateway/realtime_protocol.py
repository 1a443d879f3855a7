"""Supabase Realtime (Phoenix channels) protocol logic, without IO.

The authority is docs/contract.md, wire C. This module holds the
parts that need no socket, no database and no clock: the two Phoenix envelope
versions, the join payload and its ``postgres_changes`` subscriptions, the
filters (``col=op.value``), and ``SocketState``, the per-connection state
machine. Time is a parameter (``now``: seconds since the Unix epoch, because
JWT ``exp`` is wall-clock time). The IO shell in ``realtime.py`` feeds it
frames, ticks and row reads, and sends what it returns.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import json
import re
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

VSN_1 = "1.0.0"
VSN_2 = "2.0.0"
SUPPORTED_VSNS = (VSN_1, VSN_2)

TOPIC_PREFIX = "realtime:"
PHOENIX_TOPIC = "phoenix"

EVENTS = ("INSERT", "UPDATE", "DELETE", "*")
FILTER_OPS = ("eq", "neq", "lt", "lte", "gt", "gte", "in")

# Roles a Realtime subscriber may act as. A JWT with any other role (e.g. a
# service key) would let the read bypass RLS, which this stand-in never allows.
ALLOWED_ROLES = ("anon", "authenticated")


def _dumps(obj: Any) -> str:
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (a client may send "\ud800" escaped) cannot go out
        # as UTF-8 in a text frame; escaped it is still the same JSON.
        text = json.dumps(obj, separators=(",", ":"))
    return text


# --------------------------------------------------------------------------
# Envelopes (docs/contract.md, wire C)
# --------------------------------------------------------------------------


class MalformedFrame(ValueError):
    """A frame that is not a Phoenix message. ``topic``/``ref`` are set when
    enough of it was readable to address an error reply."""

    def __init__(self, reason: str, topic: str | None = None, ref: Any = None, join_ref: Any = None):
        super().__init__(reason)
        self.reason = reason
        self.topic = topic
        self.ref = ref
        self.join_ref = join_ref


@dataclass(frozen=True)
class Frame:
    topic: str
    event: str
    payload: dict
    ref: str | None = None
    join_ref: str | None = None


def _ref(value: Any, what: str) -> str | None:
    # Refs are "stringified increasing integers"; tolerate bare integers.
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise MalformedFrame(f"{what} must be a string or null")


def decode_frame(text: str, vsn: str) -> Frame:
    """vsn 1.0.0: ``{"topic","event","payload","ref","join_ref"}``;
    vsn 2.0.0: ``[join_ref, ref, topic, event, payload]``."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        raise MalformedFrame("invalid JSON") from None
    if vsn == VSN_2:
        if not isinstance(obj, list) or len(obj) != 5:
            raise MalformedFrame("expected an array [join_ref, ref, topic, event, payload]")
        join_ref, ref, topic, event, payload = obj
    else:
        if not isinstance(obj, dict):
            raise MalformedFrame("expected an object {topic, event, payload, ref}")
        topic, event = obj.get("topic"), obj.get("event")
        payload = obj.get("payload", {})
        ref, join_ref = obj.get("ref"), obj.get("join_ref")
    topic_ok = isinstance(topic, str)
    try:
        ref = _ref(ref, "ref")
        join_ref = _ref(join_ref, "join_ref")
    except MalformedFrame as e:
        raise MalformedFrame(e.reason, topic if topic_ok else None) from None
    if not topic_ok:
        raise MalformedFrame("topic must be a string")
    if not isinstance(event, str):
        raise MalformedFrame("event must be a string", topic, ref, join_ref)
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        raise MalformedFrame("payload must be an object", topic, ref, join_ref)
    return Frame(topic, event, payload, ref, join_ref)


def encode_frame(vsn: str, topic: str, event: str, payload: dict, ref: str | None = None,
                 join_ref: str | None = None) -> str:
    """Server → client. vsn 1.0.0 carries ``topic, event, payload, ref``; vsn
    2.0.0 is the array, ``[null, null, …]`` for server pushes."""
    if vsn == VSN_2:
        return _dumps([join_ref, ref, topic, event, payload])
    return _dumps({"topic": topic, "event": event, "payload": payload, "ref": ref})


# --------------------------------------------------------------------------
# Filters (docs/contract.md, wire C: eq neq lt lte gt gte in)
# --------------------------------------------------------------------------

_COLUMN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NUMERIC_TYPES = {"int2", "int4", "int8", "float4", "float8", "numeric", "oid"}
_TIME_TYPES = {"timestamptz", "timestamp"}


@dataclass(frozen=True)
class Filter:
    column: str
    op: str
    values: tuple[str, ...]  # one value, or the list of ``in.(a,b)``

    def matches(self, record: dict, column_types: dict[str, str]) -> bool:
        """SQL semantics: NULL matches nothing (not even ``neq``); values are
        compared as the column's type, as Realtime casts the filter value."""
        if self.column not in record:
            return False
        actual = record[self.column]
        if actual is None:
            return False
        kind = column_types.get(self.column, "text")
        try:
            a = _coerce(actual, kind)
            wanted = [_coerce(v, kind) for v in self.values]
        except (ValueError, decimal.InvalidOperation):
            return False
        try:
            if self.op == "eq":
                return a == wanted[0]
            if self.op == "neq":
                return a != wanted[0]
            if self.op == "in":
                return a in wanted
            if self.op == "lt":
                return a < wanted[0]
            if self.op == "lte":
                return a <= wanted[0]
            if self.op == "gt":
                return a > wanted[0]
            if self.op == "gte":
                return a >= wanted[0]
        except (TypeError, ArithmeticError):  # naive vs aware datetimes; NaN (decimal.InvalidOperation)
            return False
        return False


def _coerce(value: Any, kind: str) -> Any:
    if kind in _NUMERIC_TYPES:
        if isinstance(value, bool):
            raise ValueError("boolean is not a number")
        return decimal.Decimal(str(value))
    if kind == "bool":
        if isinstance(value, bool):
            return value
        s = str(value).strip().lower()
        if s in ("true", "t", "yes", "y", "on", "1"):
            return True
        if s in ("false", "f", "no", "n", "off", "0"):
            return False
        raise ValueError("not a boolean")
    if kind in _TIME_TYPES:
        s = str(value).strip()
        if s.endswith("Z"):
            s = s[:-1] + "+00:00"
        t = _dt.datetime.fromisoformat(s.replace(" ", "T", 1))
        if kind == "timestamptz" and t.tzinfo is None:
            t = t.replace(tzinfo=_dt.timezone.utc)
        return t
    if kind == "uuid":
        return str(value).strip().lower()
    if isinstance(value, str):
        return value
    return _dumps(value)


def parse_filter(text: str) -> Filter:
    """``col=op.value`` or ``col=in.(a,b,"c,d")``."""
    column, sep, rest = text.partition("=")
    column = column.strip()
    if not sep or not _COLUMN.match(column):
        raise ValueError(f"filter must look like column=op.value, got {text!r}")
    op, dot, value = rest.partition(".")
    if not dot or op not in FILTER_OPS:
        raise ValueError(f"unsupported filter operator {op!r} (use {', '.join(FILTER_OPS)})")
    if op == "in":
        if not (value.startswith("(") and value.endswith(")")):
            raise ValueError("an in filter must look like column=in.(a,b)")
        values = tuple(_split_list(value[1:-1]))
        if not values:
            raise ValueError("an in filter needs at least one value")
        return Filter(column, op, values)
    return Filter(column, op, (value,))


def _split_list(inner: str) -> list[str]:
    # PostgREST list syntax: comma separated, double quotes protect commas.
    out: list[str] = []
    cur: list[str] = []
    quoted = False
    i = 0
    while i < len(inner):
        c = inner[i]
        if quoted:
            if c == "\\" and i + 1 < len(inner):
                cur.append(inner[i + 1])
                i += 1
            elif c == '"':
                quoted = False
            else:
                cur.append(c)
        elif c == '"':
            quoted = True
        elif c == ",":
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        i += 1
    if quoted:
        raise ValueError("unterminated quote in in filter")
    last = "".join(cur).strip()
    if last or out:
        out.append(last)
    return out


# --------------------------------------------------------------------------
# Subscriptions (the join payload's config.postgres_changes)
# --------------------------------------------------------------------------


def subscription_id(params: dict) -> int:
    """A stable integer per subscription, like Realtime's phash2 of the
    params (docs/contract.md, wire C: the ids are integers). 27 bits keep it in
    the range real servers send."""
    return zlib.crc32(_dumps(params).encode()) & 0x7FFFFFF


@dataclass(frozen=True)
class Subscription:
    id: int
    event: str
    schema: str
    table: str | None  # None or "*": every table of the schema
    filter: Filter | None
    echo: dict  # what the join reply returns for it (the request plus "id")

    def wants(self, schema: str, table: str, change_type: str) -> bool:
        return (self.schema == schema
                and self.table in (None, "*", table)
                and self.event in ("*", change_type))


def parse_subscriptions(config: Any) -> list[Subscription]:
    if config is None:
        return []
    if not isinstance(config, dict):
        raise ValueError("config must be an object")
    items = config.get("postgres_changes")
    if items is None:
        return []
    if not isinstance(items, list):
        raise ValueError("config.postgres_changes must be a list")
    subs = []
    for item in items:
        if not isinstance(item, dict):
            raise ValueError("each postgres_changes entry must be an object")
        event = item.get("event")
        if event not in EVENTS:
            raise ValueError(f"postgres_changes event must be one of {', '.join(EVENTS)}")
        schema = item.get("schema", "public")
        table = item.get("table")
        flt = item.get("filter")
        if not isinstance(schema, str) or not schema:
            raise ValueError("postgres_changes schema must be a string")
        if table is not None and not isinstance(table, str):
            raise ValueError("postgres_changes table must be a string")
        if flt is not None and not isinstance(flt, str):
            raise ValueError("postgres_changes filter must be a string")
        parsed = parse_filter(flt) if flt else None
        params = {k: item[k] for k in ("event", "schema", "table", "filter") if k in item}
        params.setdefault("schema", schema)
        sid = subscription_id(params)
        subs.append(Subscription(sid, event, schema, table, parsed, {**params, "id": sid}))
    return subs


# --------------------------------------------------------------------------
# Change notifications and pushes
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """What the 0900 trigger notifies: keys only (NOTIFY is limited to 8000
    bytes; rows may hold 64 KB payloads, so the row is read per subscriber)."""
    schema: str
    table: str
    type: str
    id: Any
    commit_timestamp: str


def parse_change(text: str) -> Change:
    obj = json.loads(text)
    if not isinstance(obj, dict):
        raise ValueError("notification must be an object")
    vals = {k: obj.get(k) for k in ("schema", "table", "type", "id", "commit_timestamp")}
    for k in ("schema", "table", "type", "commit_timestamp"):
        if not isinstance(vals[k], str):
            raise ValueError(f"notification field {k} must be a string")
    if vals["type"] not in ("INSERT", "UPDATE", "DELETE"):
        raise ValueError("notification type must be INSERT, UPDATE or DELETE")
    if vals["id"] is None:
        raise ValueError("notification has no id")
    return Change(**vals)


def change_payload(ids: list[int], change: Change, columns: list[dict], record: dict) -> dict:
    data: dict[str, Any] = {
        "schema": change.schema,
        "table": change.table,
        "commit_timestamp": change.commit_timestamp,
        "type": change.type,
        "columns": columns,
        "record": record,
        "errors": None,
    }
    if change.type == "UPDATE":
        # Supabase's default replica identity: the old row is only its key.
        data["old_record"] = {"id": change.id}
    return {"ids": ids, "data": data}


# --------------------------------------------------------------------------
# Per-connection state
# --------------------------------------------------------------------------


@dataclass
class Channel:
    topic: str
    join_ref: str | None
    subs: list[Subscription]
    claims: dict
    expires_at: float | None  # the token's exp (epoch seconds), None for the anon key

    @property
    def name(self) -> str:
        return self.topic[len(TOPIC_PREFIX):]

    def matching_ids(self, change: Change, record: dict, column_types: dict[str, str]) -> list[int]:
        ids: list[int] = []
        for s in self.subs:
            if not s.wants(change.schema, change.table, change.type):
                continue
            if s.filter is not None and not s.filter.matches(record, column_types):
                continue
            if s.id not in ids:
                ids.append(s.id)
        return ids

    def wants(self, change: Change) -> bool:
        return any(s.wants(change.schema, change.table, change.type) for s in self.subs)


@dataclass
class SocketState:
    """One WebSocket's Phoenix state. ``verify(token)`` returns JWT claims or
    raises (``jwt.ExpiredSignatureError`` / ``jwt.InvalidTokenError``);
    ``anon_key`` is the publishable key, which clients send as their token
    before signing in (it stands for the ``anon`` role)."""

    vsn: str
    verify: Callable[[str], dict]
    anon_key: str
    idle_timeout: float
    last_seen: float
    channels: dict[str, Channel] = field(default_factory=dict)
    close_reason: str | None = None  # set when the socket must be closed

    # ---- client frames -------------------------------------------------

    def on_frame(self, text: str, now: float) -> list[str]:
        self.last_seen = now
        try:
            frame = decode_frame(text, self.vsn)
        except MalformedFrame as e:
            if e.topic is None:
                return []  # nothing to address a reply to: ignore it
            return [self._reply(e.topic, e.ref, e.join_ref, "error", {"reason": f"malformed message: {e.reason}"})]
        if frame.topic == PHOENIX_TOPIC:
            if frame.event == "heartbeat":
                return [self._reply(frame.topic, frame.ref, frame.join_ref, "ok", {})]
            return [self._unmatched(frame)]
        if frame.event == "phx_join":
            return self._join(frame, now)
        channel = self.channels.get(frame.topic)
        if channel is None:
            return [self._unmatched(frame)]
        if frame.event == "phx_leave":
            del self.channels[frame.topic]
            return [self._reply(frame.topic, frame.ref, channel.join_ref, "ok", {}),
                    self._close(channel)]
        if frame.event == "access_token":
            return self._access_token(channel, frame, now)
        # broadcast / presence are not served by this stand-in: acknowledge so
        # a client waiting for the reply does not time out.
        if frame.ref is not None:
            return [self._reply(frame.topic, frame.ref, channel.join_ref, "ok", {})]
        return []

    def _join(self, frame: Frame, now: float) -> list[str]:
        out: list[str] = []
        if not frame.topic.startswith(TOPIC_PREFIX):
            return [self._unmatched(frame)]
        old = self.channels.pop(frame.topic, None)
        if old is not None:
            # Phoenix: a second join on a joined topic closes the first.
            out.append(self._close(old))
        join_ref = frame.join_ref if frame.join_ref is not None else frame.ref
        try:
            subs = parse_subscriptions(frame.payload.get("config"))
        except ValueError as e:
            out.append(self._reply(frame.topic, frame.ref, join_ref, "error", {"reason": f"invalid postgres_changes: {e}"}))
            return out
        token = frame.payload.get("access_token")
        try:
            claims, expires_at = self._claims(token, now)
        except _AuthError as e:
            out.append(self._reply(frame.topic, frame.ref, join_ref, "error", {"reason": e.reason}))
            return out
        channel = Channel(frame.topic, join_ref, subs, claims, expires_at)
        self.channels[frame.topic] = channel
        out.append(self._reply(frame.topic, frame.ref, join_ref, "ok",
                               {"postgres_changes": [s.echo for s in subs]}))
        out.append(self._push(frame.topic, "system", {
            "extension": "postgres_changes", "status": "ok",
            "message": "Subscribed to PostgreSQL", "channel": channel.name}))
        return out

    def _access_token(self, channel: Channel, frame: Frame, now: float) -> list[str]:
        token = frame.payload.get("access_token")
        try:
            claims, expires_at = self._claims(token, now)
        except _AuthError as e:
            del self.channels[channel.topic]
            return [self._push(channel.topic, "system", {
                        "extension": "system", "status": "error",
                        "message": f"Received an invalid access token from client: {e.reason}",
                        "channel": channel.name}),
                    self._close(channel)]
        channel.claims = claims
        channel.expires_at = expires_at
        return []

    def _claims(self, token: Any, now: float) -> tuple[dict, float | None]:
        if token is None or token == self.anon_key:
            # The publishable key is not a user token: the subscriber is anon.
            if isinstance(token, str) and token.count(".") == 2:
                try:
                    claims = self.verify(token)
                    return self._checked(claims, now)
                except Exception:
                    pass
            return {"role": "anon"}, None
        if not isinstance(token, str) or not token:
            raise _AuthError("InvalidJWTToken: access_token must be a string")
        try:
            claims = self.verify(token)
        except Exception as e:  # jwt.ExpiredSignatureError, jwt.InvalidTokenError, …
            if type(e).__name__ == "ExpiredSignatureError":
                raise _AuthError("InvalidJWTToken: Token has expired") from None
            raise _AuthError("InvalidJWTToken: the token could not be verified") from None
        return self._checked(claims, now)

    @staticmethod
    def _checked(claims: Any, now: float) -> tuple[dict, float | None]:
        if not isinstance(claims, dict):
            raise _AuthError("InvalidJWTToken: no claims")
        if claims.get("role") not in ALLOWED_ROLES:
            raise _AuthError("InvalidJWTToken: role not allowed")
        exp = claims.get("exp")
        if exp is not None:
            if not isinstance(exp, (int, float)) or isinstance(exp, bool):
                raise _AuthError("InvalidJWTToken: exp must be a number")
            if exp <= now:
                raise _AuthError("InvalidJWTToken: Token has expired")
            return claims, float(exp)
        return claims, None

    # ---- time ----------------------------------------------------------

    def next_deadline(self) -> float | None:
        if self.close_reason is not None:
            return None
        deadlines = [self.last_seen + self.idle_timeout]
        deadlines += [c.expires_at for c in self.channels.values() if c.expires_at is not None]
        return min(deadlines)

    def on_tick(self, now: float) -> list[str]:
        out: list[str] = []
        for topic, channel in list(self.channels.items()):
            if channel.expires_at is not None and channel.expires_at <= now:
                del self.channels[topic]
                ago = int(now - channel.expires_at)
                out.append(self._push(topic, "system", {
                    "extension": "system", "status": "error",
                    "message": f"Token has expired {ago} seconds ago",
                    "channel": channel.name}))
                out.append(self._close(channel))
        if self.close_reason is None and now >= self.last_seen + self.idle_timeout:
            self.close_reason = "heartbeat timeout"
        return out

    # ---- changes -------------------------------------------------------

    def interested(self, change: Change) -> list[Channel]:
        return [c for c in self.channels.values() if c.wants(change)]

    def change_frame(self, channel: Channel, change: Change, columns: list[dict], record: dict) -> str | None:
        """The push for one channel, or None when no filter of it matches.
        Call only with a record read under ``channel.claims`` (RLS)."""
        if self.channels.get(channel.topic) is not channel:
            return None  # left or closed while the row was being read
        types = {c["name"]: c["type"] for c in columns}
        ids = channel.matching_ids(change, record, types)
        if not ids:
            return None
        return self._push(channel.topic, "postgres_changes", change_payload(ids, change, columns, record))

    # ---- envelopes -----------------------------------------------------

    def on_changes_missed(self) -> list[str]:
        """The hub lost its LISTEN connection for a while: changes of that gap were never
        announced. Like a crashed Phoenix channel, every joined channel gets phx_error (ref =
        join_ref) and is dropped; clients rejoin and backfill what they missed."""
        out = [encode_frame(self.vsn, c.topic, "phx_error", {}, c.join_ref, c.join_ref) for c in self.channels.values()]
        self.channels.clear()
        return out

    def _reply(self, topic: str, ref: str | None, join_ref: str | None, status: str, response: dict) -> str:
        return encode_frame(self.vsn, topic, "phx_reply", {"status": status, "response": response}, ref, join_ref)

    def _unmatched(self, frame: Frame) -> str:
        return self._reply(frame.topic, frame.ref, frame.join_ref, "error", {"reason": "unmatched topic"})

    def _push(self, topic: str, event: str, payload: dict) -> str:
        return encode_frame(self.vsn, topic, event, payload)

    def _close(self, channel: Channel) -> str:
        # phx_close carries ref = join_ref (docs/contract.md, wire C).
        return encode_frame(self.vsn, channel.topic, "phx_close", {}, channel.join_ref, channel.join_ref)


class _AuthError(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
