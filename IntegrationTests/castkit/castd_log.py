"""castd's log lines read back as dicts, so tests match on fields instead of substrings.

castd writes one event per line (Sources/CastCore/LogLine.swift):
    level=notice event=reconnect attempt=1 delay_s=1.0
    level=warning event=row_ignored type="a b\\"c" why="other negotiation" ignored_total=2
`parse(line)` gives {"level": "notice", "event": "reconnect", "attempt": "1", ...} (every value a
str, escapes undone), or None for a line that is not a castd event (a crash trace, a sentence).
A key that appears twice keeps its first value, as in the journal's fields.
"""
from __future__ import annotations

import re

_KEY = re.compile(r"[A-Za-z0-9_.\-]+")
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "r": "\r", "t": "\t"}


def parse(line: str) -> dict | None:
    """One castd log line as a dict of its fields, or None when it is not one."""
    fields: dict[str, str] = {}
    i, n = 0, len(line)
    while i < n:
        if fields or i:
            if line[i] != " ":
                return None
            i += 1
        m = _KEY.match(line, i)
        if not m or m.end() >= n or line[m.end()] != "=":
            return None
        key, i = m.group(), m.end() + 1
        if i < n and line[i] == '"':
            value, i = _quoted(line, i + 1)
            if value is None:
                return None
        else:
            end = line.find(" ", i)
            end = n if end < 0 else end
            value = line[i:end]
            if not value or any(c in value for c in '"\\='):
                return None
            i = end
        fields.setdefault(key, value)
    if list(fields)[:2] != ["level", "event"]:
        return None
    return fields


def _quoted(line: str, i: int) -> tuple[str | None, int]:
    out = []
    n = len(line)
    while i < n:
        c = line[i]
        i += 1
        if c == '"':
            return "".join(out), i
        if c != "\\":
            out.append(c)
            continue
        if i >= n:
            return None, i
        e = line[i]
        i += 1
        if e in _ESCAPES:
            out.append(_ESCAPES[e])
        elif e in "xu":
            width = 2 if e == "x" else 4
            digits = line[i:i + width]
            if len(digits) != width or not all(d in "0123456789abcdefABCDEF" for d in digits):
                return None, i
            out.append(chr(int(digits, 16)))
            i += width
        else:
            return None, i
    return None, i


def events(lines, event: str | None = None, **match: str) -> list[dict]:
    """The parsed lines of `event` (any event when None) whose fields equal `match`
    (values compared as strings: `events(lines, "reconnect", attempt=1)`)."""
    out = []
    for line in lines:
        f = parse(line)
        if f is None or (event is not None and f["event"] != event):
            continue
        if all(f.get(k) == str(v) for k, v in match.items()):
            out.append(f)
    return out


def numbers(fields: dict) -> dict:
    """The integer-valued fields of one event as ints (for the `stats` lines)."""
    return {k: int(v) for k, v in fields.items() if re.fullmatch(r"-?\d+", v)}
