"""The shared context of every gateway module (auth, rest, api, realtime)."""
from __future__ import annotations

from dataclasses import dataclass

import asyncpg
import jwt

from .settings import Settings


@dataclass
class Context:
    settings: Settings
    # Connected as `authenticator`: may SET LOCAL ROLE anon/authenticated/service_role, and LISTEN.
    pool: asyncpg.Pool

    def verify_jwt(self, token: str) -> dict:
        """Claims of an HS256 token signed with the project secret.
        Raises jwt.ExpiredSignatureError when expired, jwt.InvalidTokenError otherwise.
        The audience is not checked (PostgREST as Supabase configures it)."""
        return jwt.decode(
            token,
            self.settings.jwt_secret,
            algorithms=["HS256"],
            options={"verify_aud": False, "require": ["exp", "role"]},
        )
