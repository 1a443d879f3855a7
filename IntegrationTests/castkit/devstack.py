"""The local stack from Python: start and stop one (`devstack_up`, `devstack_down`), and talk
to it as its clients do: `sign_in(stack)` (an anonymous user → Tokens), `api(stack, token,
endpoint, body)` (httpx against /api/public), `rest(...)` (/rest/v1 as PostgREST clients call
it), `paired_session(stack)`, `supabase_client(stack)` (the official client), `db(stack)`
(asyncpg as the superuser). The pytest fixtures `stack` and `stack_factory`
(IntegrationTests/conftest.py) are built on these; Scripts/faults, the benchmarks and the demo
use them directly.
"""
from __future__ import annotations

import ipaddress
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass

import httpx

from castkit.paths import DEVSTACK


@dataclass
class Stack:
    api_url: str
    supabase_url: str
    key: str
    dashboard: str
    pg_url: str
    state_dir: str
    stun: str
    env: dict

    @property
    def stun_port(self) -> int:
        return int(self.stun.rsplit(":", 1)[1])


def free_port(kind=socket.SOCK_STREAM) -> int:
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def free_ports() -> tuple[int, int, int]:
    """A gateway port (also free for UDP? not needed), a PG port, a UDP STUN port, all distinct."""
    while True:
        a, b = free_port(), free_port()
        c = free_port(socket.SOCK_DGRAM)
        if len({a, b, c}) == 3:
            return a, b, c


def parse_env(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        k, sep, v = line.partition("=")
        if sep and k.isupper():
            out[k] = v
    return out


def devstack_up(**options) -> Stack:
    """Start a stack in a fresh temporary state directory; retried on a port race."""
    last = ""
    for _ in range(3):
        state = tempfile.mkdtemp(prefix="castd-stack-")
        os.chmod(state, 0o755)  # the postgres user must reach its data directory
        port, pg_port, stun_port = free_ports()
        args = [str(DEVSTACK), "up", "--state-dir", state, "--port", str(port),
                "--pg-port", str(pg_port), "--stun-port", str(stun_port)]
        for k, v in options.items():
            args += [f"--{k.replace('_', '-')}", str(v)]
        r = subprocess.run(args, capture_output=True, text=True, timeout=120)
        if r.returncode == 0:
            env = parse_env(r.stdout)
            return Stack(api_url=env["CASTD_API_URL"], supabase_url=env["CASTD_SUPABASE_URL"],
                         key=env["CASTD_SUPABASE_KEY"], dashboard=env["DEVSTACK_DASHBOARD"],
                         pg_url=env["DEVSTACK_PG_URL"], state_dir=env["DEVSTACK_STATE_DIR"],
                         stun=env["DEVSTACK_STUN"], env=env)
        last = r.stderr
        devstack_down(state)
    raise RuntimeError(f"Scripts/devstack up failed:\n{last}")


def devstack_down(state_dir: str) -> None:
    subprocess.run([str(DEVSTACK), "down", "--state-dir", state_dir], capture_output=True, text=True, timeout=60)
    if not os.environ.get("DEVSTACK_KEEP_STATE"):
        shutil.rmtree(state_dir, ignore_errors=True)


# ---------------------------------------------------------------- clients

@dataclass
class Tokens:
    access_token: str
    refresh_token: str
    user_id: str
    body: dict


def auth_headers(stack: Stack, token: str | None = None) -> dict:
    h = {"apikey": stack.key, "Content-Type": "application/json", "X-Supabase-Api-Version": "2024-01-01"}
    if token:
        h["Authorization"] = f"Bearer {token}"
    return h


def sign_in(stack: Stack) -> Tokens:
    """An anonymous user, through /auth/v1/signup as supabase clients do it."""
    r = httpx.post(f"{stack.supabase_url}/auth/v1/signup", headers=auth_headers(stack, stack.key),
                   json={"data": {}, "gotrue_meta_security": {"captcha_token": None}}, timeout=10)
    r.raise_for_status()
    b = r.json()
    return Tokens(b["access_token"], b["refresh_token"], b["user"]["id"], b)


def random_ip() -> str:
    """A made-up client address for X-Forwarded-For (a header only: no traffic
    goes there), so that tests do not share the per-IP pairing budget."""
    return str(ipaddress.IPv4Address(0xC6120000 + secrets.randbelow(0x20000)))  # 198.18.0.0/15


def api(stack: Stack, token: str | None, endpoint: str, body=None, headers: dict | None = None,
        method: str | None = None) -> httpx.Response:
    """Call /api/public/<endpoint>. Without `headers`, a random X-Forwarded-For
    is sent (see random_ip); pass headers={} to come from the real peer."""
    h = {"Content-Type": "application/json"}
    h.update({"X-Forwarded-For": random_ip()} if headers is None else headers)
    if token:
        h["Authorization"] = f"Bearer {token}"
    url = f"{stack.api_url}/api/public/{endpoint}"
    m = method or ("GET" if endpoint == "ice-config" else "POST")
    if isinstance(body, (bytes, str)):
        return httpx.request(m, url, headers=h, content=body, timeout=10)
    return httpx.request(m, url, headers=h, json=body if m == "POST" else None, timeout=10)


def rest(stack: Stack, token: str | None, method: str, path: str, *, json=None, content=None,
         params=None, prefer: str | None = None) -> httpx.Response:
    """Call /rest/v1/<path> as a PostgREST client does."""
    h = {"apikey": stack.key, "Content-Type": "application/json"}
    if token:
        h["Authorization"] = f"Bearer {token}"
    if prefer:
        h["Prefer"] = prefer
    return httpx.request(method, f"{stack.supabase_url}/rest/v1/{path}", headers=h, json=json,
                         content=content, params=params, timeout=10)


@dataclass
class PairedSession:
    session_id: str
    receiver: Tokens
    sender: Tokens
    pin: str


def supabase_client(stack: Stack):
    """The official client, signed in anonymously (no background refresh thread)."""
    from supabase import ClientOptions, create_client
    c = create_client(stack.supabase_url, stack.key, ClientOptions(auto_refresh_token=False, persist_session=False))
    s = c.auth.sign_in_anonymously().session
    return c, Tokens(s.access_token, s.refresh_token, s.user.id, {})


def paired_session(stack: Stack, approve: bool | None = True, receiver: Tokens | None = None,
                   sender: Tokens | None = None) -> PairedSession:
    """Receiver creates, sender pairs with the PIN, receiver approves (or not, with approve=None)."""
    receiver, sender = receiver or sign_in(stack), sender or sign_in(stack)
    c = api(stack, receiver.access_token, "session-create", {})
    assert c.status_code == 200, c.text
    sid, pin = c.json()["sessionId"], c.json()["pin"]
    p = api(stack, sender.access_token, "session-pair", {"pin": pin, "deviceName": "test"})
    assert p.status_code == 200, p.text
    if approve is not None:
        a = api(stack, receiver.access_token, "session-approve", {"sessionId": sid, "approve": approve})
        assert a.status_code == 200, a.text
    return PairedSession(sid, receiver, sender, pin)


async def db(stack: Stack):
    """An asyncpg connection as the superuser, for inspecting and ageing rows."""
    import asyncpg
    return await asyncpg.connect(stack.pg_url)
