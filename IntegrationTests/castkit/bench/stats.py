"""Small statistics shared by the bench scripts."""
from __future__ import annotations


def quantile(values: list[float], q: float) -> float | None:
    """Nearest-rank quantile (as Bench.percentiles in Swift), None for no values."""
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int((len(s) - 1) * q + 0.5))]


def percentiles(values: list[float]) -> dict:
    return {k: (round(v, 3) if v is not None else None)
            for k, v in (("p50", quantile(values, 0.5)), ("p99", quantile(values, 0.99)))}


def ratio(a, b) -> float | None:
    """a / b rounded, None when either is missing or b is zero."""
    if a is None or b in (None, 0):
        return None
    return round(a / b, 3)
