"""castd --session against the local stack and an aiortc receiver: the session lifecycle of
spec §5/§6/§9/§10 (negotiation, connected, heartbeat, SIGTERM, receiver stop, deny/ended starts)."""
import asyncio
import time

from castkit.castd_proc import Daemon, castd_env, pair, start_cast


async def test_connects_reports_connected_and_ends_cleanly_on_sigterm(stack, tmp_path):
    rx, sid, answerer, daemon = await start_cast(stack, tmp_path)
    try:
        await daemon.wait_log("event=connected", timeout=30)
        await answerer.signals.wait_status("connected", timeout=10)
        t0 = time.monotonic()
        daemon.signal()
        try:
            row = await answerer.signals.wait_row(lambda r: r["message_type"] == "disconnect", timeout=5)
        except TimeoutError:
            raise AssertionError("no disconnect row; castd said:\n" + "\n".join(daemon.stderr_lines[-25:]))
        assert row["payload"] == {"reason": "sender_ended"}
        await answerer.signals.wait_status("disconnected", timeout=5)
        assert time.monotonic() - t0 < 2.0
        rc, out = await daemon.wait(timeout=5)
        assert rc == 0, "\n".join(daemon.stderr_lines[-20:])
        assert "Cast stopped." in out
    finally:
        await daemon.kill()
        await answerer.close()
        await rx.client.close()


async def test_every_offer_has_its_own_negotiation_id_and_candidates_follow(stack, tmp_path):
    rx, sid, answerer, daemon = await start_cast(stack, tmp_path)
    try:
        await daemon.wait_log("event=connected", timeout=30)
        rows = await rx.client.select(sid, "receiver")
        offers = [r for r in rows if r["message_type"] == "offer"]
        cands = [r for r in rows if r["message_type"] == "ice_candidate"]
        assert len(offers) == 1
        nid = offers[0]["payload"]["negotiationId"]
        assert offers[0]["payload"]["type"] == "offer" and "m=video" in offers[0]["payload"]["sdp"]
        assert cands and all(c["payload"]["negotiationId"] == nid for c in cands)
        assert cands[-1]["payload"].get("endOfCandidates") is True
        assert all(c["created_at"] >= offers[0]["created_at"] for c in cands)
    finally:
        daemon.signal()
        await daemon.wait(timeout=5)
        await answerer.close()
        await rx.client.close()


async def test_receiver_stop_ends_the_daemon_with_its_sentence(stack, tmp_path):
    rx, sid, answerer, daemon = await start_cast(stack, tmp_path)
    try:
        await daemon.wait_log("event=connected", timeout=30)
        await rx.client.api("session-end", {"sessionId": sid})
        rc, out = await daemon.wait(timeout=10)
        assert rc == 0
        assert "The receiver ended the session." in out
        rows = await rx.client.select(sid, "receiver")
        assert not any(r["message_type"] == "disconnect" for r in rows)   # castd sends nothing after a receiver stop
    finally:
        await daemon.kill()
        await answerer.close()
        await rx.client.close()


async def test_a_session_that_is_over_refuses_to_start(stack, tmp_path):
    rx, rc, events, raw = await pair(stack, tmp_path)
    sid = rx.session["sessionId"]
    await rx.client.api("session-end", {"sessionId": sid})
    daemon = await Daemon.start(castd_env(stack, tmp_path), sid)
    rc, out = await daemon.wait(timeout=20)
    assert rc == 3   # the session is over for good: the unit's RestartPreventExitStatus
    assert any("already over" in l for l in daemon.stderr_lines)
    await rx.client.close()


async def test_no_token_or_key_material_in_the_daemon_log(stack, tmp_path):
    rx, sid, answerer, daemon = await start_cast(stack, tmp_path)
    try:
        await daemon.wait_log("event=connected", timeout=30)
        daemon.signal()
        await daemon.wait(timeout=5)
    finally:
        await daemon.kill()
        await answerer.close()
        await rx.client.close()
    import json
    cred = json.loads((tmp_path / "castd" / "credentials.json").read_text())
    text = "\n".join(daemon.stderr_lines)
    assert cred["access_token"] not in text and cred["refresh_token"] not in text
    assert cred["access_token"].split(".")[1] not in text
    assert "event=connected" in text


async def test_authorization_expiry_ends_the_cast_with_pair_again(stack_factory, tmp_path):
    # spec §10 compressed: approval gives 12 s of sender authorization, and castd's first
    # heartbeat (30 s) comes too late to extend it.
    stack = stack_factory(sender_auth=12)
    rx, sid, answerer, daemon = await start_cast(stack, tmp_path)
    try:
        await daemon.wait_log("event=connected", timeout=30)
        rc, out = await daemon.wait(timeout=30)
        assert rc == 3
        assert "castd: Authorization expired; pair again." in daemon.stderr_lines
        # castd stopped signaling: no disconnect row from it (RLS would refuse it anyway).
        rows = await rx.client.select(sid, "receiver")
        assert not any(r["message_type"] == "disconnect" for r in rows)
    finally:
        await daemon.kill()
        await answerer.close()
        await rx.client.close()
