"""ISO-8601 the way the hosted system prints it (JavaScript's toISOString: UTC, milliseconds, Z)."""
from __future__ import annotations

import datetime as dt


def iso_ms(t: dt.datetime | None) -> str | None:
    if t is None:
        return None
    t = t.astimezone(dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def iso_us(t: dt.datetime | None) -> str | None:
    """GoTrue prints user timestamps with microseconds and Z."""
    if t is None:
        return None
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
