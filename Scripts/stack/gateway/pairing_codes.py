"""Pairing codes (spec §3, §4), pure: the six-digit PIN, kept only as
HMAC-SHA256(server secret, digits); the QR token, 32 random bytes in
base64url without padding (43 characters), kept only as SHA-256."""
from __future__ import annotations

import base64
import hashlib
import hmac
import math
import secrets


def new_pin() -> str:
    return f"{secrets.randbelow(1_000_000):06d}"


def normalize_pin(raw) -> str:
    """spec §4: any non-digit characters are stripped server-side ("482 913" → "482913")."""
    return "".join(ch for ch in str(raw) if "0" <= ch <= "9")


def pin_hmac(secret: str, digits: str) -> str:
    return hmac.new(secret.encode(), digits.encode(), hashlib.sha256).hexdigest()


def new_qr_token() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()


def qr_token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def grouped(pin: str) -> str:
    """How the receiver shows it: "482 913"."""
    return f"{pin[:3]} {pin[3:]}"


def retry_after(failure_ages: list[float], limit: int, window: float) -> int | None:
    """Seconds until one more attempt is allowed under "`limit` failures per
    rolling `window` seconds", given the ages (seconds, now − attempt time) of
    the failures still inside the window; None when an attempt is allowed now.

    With n ≥ limit failures inside the window, n − limit + 1 of them must
    leave it: the wait is until the (n − limit + 1)-th oldest does, i.e.
    index n − limit of the ages sorted oldest first."""
    inside = sorted((a for a in failure_ages if a < window), reverse=True)
    n = len(inside)
    if n < limit:
        return None
    age = inside[n - limit]
    return max(1, math.ceil(window - age))
