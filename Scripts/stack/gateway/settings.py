"""Options of the gateway: every duration and limit is one, so that tests can
compress time (Scripts/devstack up --access-token-ttl 2 …). Secrets come from
the environment (DEVSTACK_*), never from argv."""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Settings:
    jwt_secret: str
    anon_key: str  # the publishable key (an HS256 JWT with role anon)
    pin_secret: str  # HMAC key of the pairing PINs (spec §4)
    host: str = "127.0.0.1"
    port: int = 54321
    api_url: str = "http://127.0.0.1:54321"
    supabase_url: str = "http://localhost:54321"
    web_dir: str = ""
    pg_host: str = "127.0.0.1"
    pg_port: int = 54322
    pg_user: str = "authenticator"
    pg_password: str = field(default="", repr=False)
    pg_database: str = "postgres"
    stun_port: int = 54323
    # durations (seconds) and limits; defaults are production's
    access_token_ttl: int = 3600
    pairing_window: int = 300
    sender_auth: int = 7200
    sender_auth_cap: int = 43200
    heartbeat_silence: int = 120
    cleanup_interval: int = 300
    signaling_rate_limit: int = 200
    signaling_rate_window: int = 60
    pair_failure_limit: int = 5
    pair_failure_window: int = 600
    qr_failure_limit: int = 5
    realtime_idle_timeout: int = 60
    fault_hooks: int = 0  # 1: /admin/faults/* for Scripts/faults (gateway/faults.py)
    turn_urls: tuple[str, ...] = ()
    turn_secret: str = field(default="", repr=False)
    turn_credential_ttl: int = 86400

    def __repr__(self) -> str:  # never print secrets
        return f"Settings(port={self.port}, api_url={self.api_url!r}, supabase_url={self.supabase_url!r})"


INT_OPTIONS = [
    "port", "pg_port", "stun_port", "access_token_ttl", "pairing_window", "sender_auth",
    "sender_auth_cap", "heartbeat_silence", "cleanup_interval", "signaling_rate_limit",
    "signaling_rate_window", "pair_failure_limit", "pair_failure_window", "qr_failure_limit",
    "turn_credential_ttl", "realtime_idle_timeout", "fault_hooks",
]
STR_OPTIONS = ["host", "api_url", "supabase_url", "web_dir", "pg_host", "pg_user", "pg_database"]


def parse(argv: list[str] | None = None, environ: dict | None = None) -> Settings:
    env = os.environ if environ is None else environ
    defaults = Settings(jwt_secret="", anon_key="", pin_secret="")
    p = argparse.ArgumentParser(prog="python -m gateway")
    for name in INT_OPTIONS:
        p.add_argument("--" + name.replace("_", "-"), type=int, default=getattr(defaults, name))
    for name in STR_OPTIONS:
        p.add_argument("--" + name.replace("_", "-"), default=getattr(defaults, name))
    p.add_argument("--turn", default="", help="TURN URL(s), comma-separated")
    a = p.parse_args(argv)
    missing = [k for k in ("DEVSTACK_JWT_SECRET", "DEVSTACK_ANON_KEY", "DEVSTACK_PIN_SECRET") if not env.get(k)]
    if missing:
        p.error("missing environment: " + ", ".join(missing))
    turn = tuple(u.strip() for u in a.turn.split(",") if u.strip())
    if turn and not env.get("DEVSTACK_TURN_SECRET"):
        p.error("--turn needs DEVSTACK_TURN_SECRET in the environment")
    kw = {name: getattr(a, name) for name in INT_OPTIONS + STR_OPTIONS}
    return Settings(
        jwt_secret=env["DEVSTACK_JWT_SECRET"],
        anon_key=env["DEVSTACK_ANON_KEY"],
        pin_secret=env["DEVSTACK_PIN_SECRET"],
        pg_password=env.get("DEVSTACK_DB_PASSWORD", ""),
        turn_urls=turn,
        turn_secret=env.get("DEVSTACK_TURN_SECRET", "") if turn else "",
        **kw,
    )
