"""castd against the local stack behind a real TLS endpoint (castkit/tlsproxy.py, a self-signed
certificate made with openssl): refused by default with a clear error and nothing sent to the API;
with --dev-trust-certificate pairing and a cast work over https:// and wss://; a certificate for
another name is refused even with the flag (issue 8 §7)."""
import asyncio
import json

import pytest

from castkit.castd_proc import Daemon, Receiver, castd_env, run_castd
from castkit.receiver_answerer import ReceiverAnswerer
from castkit.tlsproxy import TLSProxy, make_certificate
from castkit.xscreen import XScreen


def gateway_port(stack) -> int:
    return int(stack.api_url.rsplit(":", 1)[1])


def tls_env(stack, state_home, proxy: TLSProxy, **extra) -> dict:
    return castd_env(stack, state_home, CASTD_API_URL=proxy.url, CASTD_SUPABASE_URL=proxy.url, **extra)


async def pair_through(stack, env, *args) -> tuple[Receiver, int, str, str]:
    rx = Receiver(stack)
    s = await rx.create()
    task = asyncio.create_task(run_castd(env, "pair", "--pin", s["pin"], "--json", *args))
    await rx.wait_pairing_then(True)
    rc, out, err = await task
    return rx, rc, out, err


async def test_a_self_signed_backend_is_refused_clearly_and_nothing_reaches_the_api(stack, tmp_path):
    cert = make_certificate(tmp_path / "pki", "IP:127.0.0.1")
    async with TLSProxy("127.0.0.1", gateway_port(stack), cert) as proxy:
        rc, out, err = await run_castd(tls_env(stack, tmp_path, proxy), "pair", "--pin", "482913")
        assert rc == 1, out + err
        assert "certificate of 127.0.0.1 was not accepted: self-signed certificate" in err, err
        assert "482913" not in out + err
        assert "WARNING" not in err                                  # no development mode without the flag
        assert proxy.handshakes_failed >= 1 and proxy.handshakes_ok == 0
        assert proxy.upstream_connections == 0 and proxy.bytes_up == 0
        assert not (tmp_path / "castd" / "credentials.json").exists()


@pytest.mark.timeout(150)
async def test_with_the_dev_flag_pairing_and_a_cast_work_over_https_and_wss(stack, tmp_path):
    cert = make_certificate(tmp_path / "pki", "IP:127.0.0.1")
    screen = await XScreen(640, 360).start()
    async with TLSProxy("127.0.0.1", gateway_port(stack), cert) as proxy:
        env = tls_env(stack, tmp_path, proxy, DISPLAY=screen.display)
        rx, rc, out, err = await pair_through(stack, env, "--dev-trust-certificate", str(cert.cert))
        try:
            assert rc == 0, out + err
            events = [json.loads(l) for l in out.splitlines() if l.strip()]
            assert [e["event"] for e in events] == ["paired", "approved"]
            assert err.count("castd: WARNING: development mode: trusting the certificate in") == 1
            assert proxy.handshakes_ok >= 2 and proxy.upstream_connections >= 2   # REST calls and the Realtime socket
            sid = rx.session["sessionId"]

            # The same session without the flag: refused, clear message, non-zero exit, at once.
            before = proxy.upstream_connections
            refused = await Daemon.start(tls_env(stack, tmp_path, proxy), sid)
            rc2, _ = await refused.wait(timeout=20)
            said = [l for l in refused.stderr_lines if l.startswith("castd: ")]
            assert rc2 == 1, refused.stderr_lines[-20:]
            assert any("certificate of 127.0.0.1 was not accepted" in l for l in said), said
            assert proxy.upstream_connections == before

            # With the flag (from the environment this time): a real cast, signaling over https and wss.
            answerer = ReceiverAnswerer(rx.client, sid)
            await answerer.start()
            ws_before = proxy.upstream_connections
            daemon = await Daemon.start(tls_env(stack, tmp_path, proxy, DISPLAY=screen.display,
                                                CASTD_DEV_TRUST_CERTIFICATE=str(cert.cert)), sid)
            try:
                await answerer.wait_frames(20, timeout=60)
                assert daemon.log_has("castd: WARNING: development mode")
                assert daemon.log_has("event=subscribed")
                assert proxy.upstream_connections > ws_before and proxy.bytes_down > 0
                daemon.signal()
                rc3, _ = await daemon.wait(timeout=10)
                assert rc3 == 0
            finally:
                await daemon.kill()
                await answerer.close()
        finally:
            await rx.client.close()
            screen.stop()


async def test_a_certificate_for_another_name_is_refused_even_with_the_flag(stack, tmp_path):
    cert = make_certificate(tmp_path / "pki", "DNS:elsewhere.test")
    async with TLSProxy("127.0.0.1", gateway_port(stack), cert) as proxy:
        rc, out, err = await run_castd(tls_env(stack, tmp_path, proxy), "pair", "--pin", "482913",
                                       "--dev-trust-certificate", str(cert.cert))
        assert rc == 1, out + err
        assert "castd: WARNING: development mode" in err
        assert "certificate of 127.0.0.1 was not accepted" in err and "mismatch" in err, err
        assert proxy.upstream_connections == 0 and proxy.bytes_up == 0


async def test_a_bad_dev_certificate_file_is_a_usage_error(stack, tmp_path):
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    rc, out, err = await run_castd(castd_env(stack, tmp_path), "pair", "--pin", "482913",
                                   "--dev-trust-certificate", str(tmp_path / "junk.pem"))
    assert rc == 2 and "--dev-trust-certificate" in err and "no PEM certificate" in err, err
