"""Scripts/devstack itself: the KEY=value contract, status/down, the STUN
responder, loopback-only listening, static pages and CORS."""
import json
import os
import secrets
import socket
import struct
import subprocess
import time
from pathlib import Path

import httpx

from castkit.devstack import devstack_down, devstack_up, sign_in
from castkit.paths import DEVSTACK

KEYS = ("CASTD_API_URL", "CASTD_SUPABASE_URL", "CASTD_SUPABASE_KEY", "DEVSTACK_DASHBOARD",
        "DEVSTACK_PG_URL", "DEVSTACK_STATE_DIR", "DEVSTACK_STUN")


def test_up_prints_every_key_with_different_hosts_for_api_and_supabase(stack):
    for k in KEYS:
        assert stack.env.get(k), k
    api, sb = httpx.URL(stack.api_url), httpx.URL(stack.supabase_url)
    assert api.host != sb.host and api.port == sb.port
    assert {api.host, sb.host} == {"127.0.0.1", "localhost"}
    assert stack.dashboard == f"{stack.api_url}/dashboard"
    for base in (stack.api_url, stack.supabase_url):
        assert httpx.get(f"{base}/health").json() == {"ok": True}
    claims = json.loads(__import__("base64").urlsafe_b64decode(stack.key.split(".")[1] + "=="))
    assert claims["role"] == "anon"


def test_stun_binding_answers_with_our_own_address(stack):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(2)
    try:
        txid = secrets.token_bytes(12)
        s.sendto(struct.pack("!HHI", 1, 0, 0x2112A442) + txid, ("127.0.0.1", stack.stun_port))
        data, _ = s.recvfrom(1500)
        port = s.getsockname()[1]
    finally:
        s.close()
    assert data[:2] == b"\x01\x01" and data[4:8] == bytes.fromhex("2112a442") and data[8:20] == txid
    assert data[20:24] == bytes.fromhex("00200008")
    assert data[24:28] == struct.pack("!BBH", 0, 1, port ^ 0x2112)
    assert data[28:32] == struct.pack("!I", 0x7F000001 ^ 0x2112A442)
    assert data[-8:-4] == bytes.fromhex("80280004")


def test_services_listen_on_loopback_only(stack):
    pg_port = int(stack.env["DEVSTACK_PG_URL"].rsplit(":", 1)[1].split("/")[0])
    gw_port = httpx.URL(stack.api_url).port
    out = subprocess.run(["ss", "-Hltnu"], capture_output=True, text=True).stdout
    mine = [line.split() for line in out.splitlines()
            if any(line.split()[4].endswith(f":{p}") for p in (pg_port, gw_port, stack.stun_port))]
    addrs = sorted({l[4] for l in mine})
    assert addrs == sorted({f"127.0.0.1:{pg_port}", f"127.0.0.1:{gw_port}", f"127.0.0.1:{stack.stun_port}"})


def test_postgres_runs_with_state_in_the_state_dir(stack):
    data = Path(stack.state_dir) / "pg" / "data"
    assert (data / "postmaster.pid").exists()
    pid = int((data / "postmaster.pid").read_text().split()[0])
    if os.getuid() == 0:
        assert Path(f"/proc/{pid}").stat().st_uid == __import__("pwd").getpwnam("postgres").pw_uid


def test_status_reports_running_without_secrets(stack):
    r = subprocess.run([str(DEVSTACK), "status", "--state-dir", stack.state_dir], capture_output=True, text=True)
    assert r.returncode == 0
    assert "gateway   running" in r.stdout and "postgres  running" in r.stdout
    assert f"CASTD_API_URL={stack.api_url}" in r.stdout
    assert stack.key not in r.stdout and "DEVSTACK_PG_URL" not in r.stdout


def gone(pid: int, timeout: float = 5.0) -> bool:
    """True once the process has exited (a zombie waiting for init counts as exited)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_up_twice_is_refused_and_down_stops_everything():
    s = devstack_up()
    try:
        r = subprocess.run([str(DEVSTACK), "up", "--state-dir", s.state_dir], capture_output=True, text=True)
        assert r.returncode == 1 and "already runs" in r.stderr
        gw_pid = int((Path(s.state_dir) / "gateway.pid").read_text())
        pg_pid = int((Path(s.state_dir) / "pg" / "data" / "postmaster.pid").read_text().split()[0])
        r = subprocess.run([str(DEVSTACK), "down", "--state-dir", s.state_dir], capture_output=True, text=True)
        assert r.returncode == 0 and "gateway" in r.stderr and "postgres" in r.stderr
        assert gone(gw_pid) and gone(pg_pid)
        r = subprocess.run([str(DEVSTACK), "status", "--state-dir", s.state_dir], capture_output=True, text=True)
        assert r.returncode == 3 and "gateway   stopped" in r.stdout
    finally:
        devstack_down(s.state_dir)


def test_config_js_and_missing_pages(stack):
    r = httpx.get(f"{stack.api_url}/web/config.js")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/javascript")
    prefix = "window.CASTD_CONFIG = "
    assert r.text.startswith(prefix)
    cfg = json.loads(r.text[len(prefix):].rstrip().rstrip(";"))
    assert cfg == {"apiUrl": stack.api_url, "supabaseUrl": stack.supabase_url, "supabaseKey": stack.key}
    r = httpx.get(f"{stack.api_url}/web/does-not-exist.html")
    assert r.status_code == 404 and "does-not-exist.html" in r.text
    r = httpx.get(f"{stack.api_url}/web/../../devstack")
    assert r.status_code == 404


def test_cors_lets_the_pages_call_the_other_host(stack):
    r = httpx.options(f"{stack.supabase_url}/rest/v1/signaling_messages",
                      headers={"Origin": stack.api_url, "Access-Control-Request-Method": "POST",
                               "Access-Control-Request-Headers": "apikey,authorization,content-type,prefer"})
    assert r.status_code == 204
    assert r.headers["access-control-allow-origin"] == "*"
    assert "prefer" in r.headers["access-control-allow-headers"]
    t = sign_in(stack)
    r = httpx.post(f"{stack.api_url}/api/public/session-pair", headers={"Origin": stack.supabase_url,
                                                                        "Authorization": f"Bearer {t.access_token}"},
                   json={})
    assert r.status_code == 400 and r.headers["access-control-allow-origin"] == "*"


def test_secrets_never_reach_the_logs(stack):
    from castkit.devstack import api
    receiver, sender = sign_in(stack), sign_in(stack)
    c = api(stack, receiver.access_token, "session-create", {}).json()
    token = httpx.URL(c["qrUrl"]).params["t"]
    httpx.get(c["qrUrl"])  # the /pair page, with the token in the query
    api(stack, sender.access_token, "session-pair", {"pin": c["pin"]})
    httpx.post(f"{stack.supabase_url}/auth/v1/token?grant_type=refresh_token",
               headers={"apikey": stack.key}, json={"refresh_token": sender.refresh_token})
    logs = "".join((Path(stack.state_dir) / f).read_text(errors="replace") for f in ("gateway.log", "postgres.log"))
    assert "path=/pair status=200" in logs  # the request was logged …
    # (the 6-digit PIN is left out: pids and timings could contain the same digits by chance)
    for secret in (token, sender.refresh_token, sender.access_token, receiver.access_token):
        assert secret not in logs  # … without its secrets
