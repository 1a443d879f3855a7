"""The stack's fault hooks that Scripts/faults drives: `devstack up --fault-hooks 1` (injected
HTTP errors for a while, Realtime sockets dropped) and `devstack restart gateway|postgres`."""
import subprocess
import time

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from castkit.devstack import DEVSTACK, sign_in


def test_without_the_option_there_are_no_fault_hooks(stack):
    r = httpx.post(f"{stack.api_url}/admin/faults/errors", json={"seconds": 5}, timeout=10)
    assert r.status_code == 404
    assert httpx.get(f"{stack.api_url}/health", timeout=10).status_code == 200


def test_injected_errors_last_their_time_on_the_chosen_prefixes_only(stack_factory):
    st = stack_factory(fault_hooks=1)
    r = httpx.post(f"{st.api_url}/admin/faults/errors",
                   json={"status": 503, "seconds": 2, "prefixes": ["/rest/v1"]}, timeout=10)
    assert r.json() == {"ok": True}
    t0 = time.monotonic()
    got = httpx.get(f"{st.supabase_url}/rest/v1/casting_sessions", headers={"apikey": st.key}, timeout=10)
    assert got.status_code == 503 and got.json()["code"] == "injected_fault"
    assert httpx.get(f"{st.api_url}/health", timeout=10).status_code == 200      # other paths answer
    while time.monotonic() - t0 < 2.2:
        time.sleep(0.1)
    after = httpx.get(f"{st.supabase_url}/rest/v1/casting_sessions", headers={"apikey": st.key}, timeout=10)
    assert after.status_code == 200
    assert httpx.get(f"{st.api_url}/admin/faults/status", timeout=10).json()["served"] == 1


def test_realtime_drop_aborts_open_sockets(stack_factory):
    st = stack_factory(fault_hooks=1)
    url = st.supabase_url.replace("http://", "ws://") + f"/realtime/v1/websocket?apikey={st.key}&vsn=1.0.0"
    with connect(url) as ws:
        dropped = httpx.post(f"{st.api_url}/admin/faults/realtime-drop", timeout=10).json()["dropped"]
        assert dropped == 1
        with pytest.raises(ConnectionClosed):     # the TCP connection was aborted
            ws.recv(timeout=5)


def test_restart_gateway_and_postgres_keep_the_data(stack_factory):
    st = stack_factory(fault_hooks=1, pairing_window=297)
    user = sign_in(st)
    for service in ("gateway", "postgres"):
        r = subprocess.run([str(DEVSTACK), "restart", service, "--state-dir", st.state_dir, "--down-seconds", "1"],
                           capture_output=True, text=True, timeout=90)
        assert r.returncode == 0, r.stderr
        deadline = time.monotonic() + 20
        while True:       # the gateway's pool reconnects to the restarted PostgreSQL on first use
            h = httpx.get(f"{st.api_url}/health", timeout=10)
            if h.status_code == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert h.status_code == 200, service
        # The same user still signs in with its refresh token: the data survived.
        tok = httpx.post(f"{st.supabase_url}/auth/v1/token?grant_type=refresh_token",
                         headers={"apikey": st.key}, json={"refresh_token": user.refresh_token}, timeout=10)
        assert tok.status_code == 200, (service, tok.text)
        user = user.__class__(tok.json()["access_token"], tok.json()["refresh_token"], user.user_id, tok.json())
