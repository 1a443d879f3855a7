"""Rows of the hostile family: broken or hostile receiver rows, an answer with a wrong DTLS
fingerprint, and a self-signed TLS endpoint (issue 8 §5, §7)."""
from __future__ import annotations

import asyncio
import re
import time

from castkit.faults.world import R_TUN, VICTIM, Result, World, casting, check


async def hostile_rows(w: World) -> list[Result]:
    """Hostile or broken receiver rows against one running cast: each must be refused by the stack or
    rejected by castd with a log line, and the cast must go on."""
    results = []
    async with casting(w, "hostile rows") as c:
        rep = await c.report()
        nid = rep["negotiation_id"]
        big = "a=" + "x" * (64 * 1024)
        many = [{"message_type": "ice_candidate",
                 "payload": {"negotiationId": nid, "candidate": f"candidate:{i} 1 udp 2122260223 10.77.{1 + i // 250}.{i % 250 + 1} "
                                                                  f"{20000 + i} typ host", "sdpMid": "0", "sdpMLineIndex": 0}}
                for i in range(2000)]
        cases = [
            ("malformed SDP", [{"message_type": "answer", "payload": {"type": "answer", "sdp": "v=0\r\nthis is not sdp",
                                                                      "negotiationId": nid}}]),
            ("wrong negotiationId", [{"message_type": "answer", "payload": {"type": "answer", "sdp": "v=0\r\n",
                                                                            "negotiationId": "00000000-0000-4000-8000-000000000000"}},
                                     {"message_type": "ice_candidate", "payload": {"negotiationId": "00000000-0000-4000-8000-000000000000",
                                                                                    "candidate": "candidate:1 1 udp 1 10.77.0.2 9 typ host",
                                                                                    "sdpMid": "0", "sdpMLineIndex": 0}}]),
            ("missing negotiationId", [{"message_type": "answer", "payload": {"type": "answer", "sdp": "v=0\r\n"}},
                                       {"message_type": "ice_candidate", "payload": {"candidate": "candidate:1 1 udp 1 10.77.0.2 9 typ host"}}]),
            ("malformed candidate", [{"message_type": "ice_candidate", "payload": {"negotiationId": nid, "candidate": "candidate:garbage",
                                                                                   "sdpMid": "0", "sdpMLineIndex": 0}}]),
            ("64 KB payload", [{"message_type": "answer", "payload": {"type": "answer", "sdp": big, "negotiationId": nid}}]),
            ("60 KB payloads", [{"message_type": "answer", "payload": {"type": "answer", "sdp": big[:60000], "negotiationId": nid}},
                                {"message_type": "ice_candidate", "payload": {"negotiationId": nid, "candidate": big[:60000],
                                                                              "sdpMid": "0", "sdpMLineIndex": 0}}]),
            ("row for another session", [{"message_type": "disconnect", "payload": {"reason": "receiver_ended"},
                                          "session_id": "11111111-1111-4111-8111-111111111111"}]),
            ("unknown message type", [{"message_type": "shutdown_now", "payload": {"negotiationId": nid}}]),
            ("invalid JSON payload", [{"message_type": "answer", "payload": "{\"type\": \"answer\", \"sdp\": "},
                                      {"message_type": "ice_candidate", "payload": [1, 2, 3]}]),
            ("candidates at non-unicast addresses", [
                {"message_type": "ice_candidate", "payload": {"negotiationId": nid, "candidate": f"candidate:{i} 1 udp 2122260223 {a} typ host",
                                                              "sdpMid": "0", "sdpMLineIndex": 0}}
                for i, a in enumerate(["224.0.0.251 5353", "239.255.255.250 1900", "255.255.255.255 9", "0.0.0.0 9",
                                       "ff02::fb 5353", f"{R_TUN} 0"])]),
            # 40 candidates at one address no receiver holds (routed into the receiver's namespace,
            # counted by the router): ICE may check them, paced, never flood them.
            ("40 candidates at one victim address", [
                {"message_type": "ice_candidate", "payload": {"negotiationId": nid, "candidate": f"candidate:{100 + i} 1 udp 2122260223 "
                                                              f"{VICTIM} {30000 + i} typ host", "sdpMid": "0", "sdpMLineIndex": 0}}
                for i in range(40)]),
            ("thousands of candidates", many),
        ]
        for label, rows in cases:
            res = Result(f"hostile: {label}", "refused by the stack or a counted, logged rejection in castd; "
                                              "no crash, the cast goes on (issue 8 §5)")
            t = time.monotonic()
            n_before = len(c.daemon.stderr_lines)
            stun_before = w.router.stats()["a->b"]["classes"]["stun"]["packets"]
            ins = await c.rx.cmd(cmd="insert", rows=rows, timeout=300)
            await asyncio.sleep(3 if len(rows) < 100 else 10)
            new = c.daemon.stderr_lines[n_before:]
            rejections = [l for l in new if "event=stats" not in l
                          and re.search(r"ignored|reject|invalid|too_large|malformed", l)]
            stun_pps = (w.router.stats()["a->b"]["classes"]["stun"]["packets"] - stun_before) / (time.monotonic() - t)
            alive = c.daemon.proc.returncode is None
            try:
                await c.wait_frames(10, timeout=10, since=time.monotonic())
                flowing = True
            except (TimeoutError, RuntimeError):
                flowing = False
            refused = ins.get("error_count", 0)
            if label.startswith("40 candidates"):
                # Accepted as candidates; what matters is the rate of checks they draw (RFC 8445 §14.2:
                # one new transaction per Ta = 50 ms at most, i.e. ≤ 20 STUN packets/s plus retransmissions).
                handled = stun_pps <= 25
            elif len(rows) < 100:
                handled = refused + len(rejections) >= len(rows)
            else:
                handled = refused + len(rejections) > 0
            ok = alive and flowing and handled
            check(res, ok, f"stack refused {refused}/{len(rows)} ({', '.join(sorted(set(ins.get('errors', []))))[:80]}); "
                           f"castd logged {len(rejections)} rejection(s); "
                           f"{'alive' if alive else 'EXITED'}, frames {'flowing' if flowing else 'STOPPED'}",
                  rows=len(rows), refused_by_stack=refused, castd_rejections=len(rejections),
                  castd_stun_pps=round(stun_pps, 1), example=(rejections[:1] or [""])[0][:200],
                  ignored_total=max([int(x) for l in rejections for x in re.findall(r"ignored_total=(\d+)", l)] or [0]))
            res.seconds = round(time.monotonic() - t, 1)
            results.append(res)
        return results


async def wrong_fingerprint(w: World) -> Result:
    r = Result("hostile: wrong DTLS fingerprint", "the DTLS handshake is refused; no media (RTP) leaves castd; no crash")
    rtp0 = w.router.stats()["a->b"]["classes"]["rtp"]["packets"]
    async with casting(w, "wrong fingerprint", wait_frames=False, tamper=True) as c:
        await asyncio.sleep(15)
        rtp = w.router.stats()["a->b"]["classes"]["rtp"]["packets"] - rtp0
        rep = await c.report()
        rc = c.daemon.proc.returncode
        dtls_errors = [l for l in c.daemon.stderr_lines if re.search(r"fingerprint|dtls|handshake", l, re.I)
                       and re.search(r"error|fail|mismatch|warning", l, re.I)]
        said = [l for l in c.daemon.stderr_lines if l.startswith("castd: ")]
        ok = rtp == 0 and not rep["frames"] and (rc is None or rc >= 0) and bool(dtls_errors)
        return check(r, ok, f"{rtp} RTP packets left castd, {len(rep['frames'])} frames decoded; castd "
                            f"{'alive' if rc is None else f'exit {rc}'}; {len(dtls_errors)} DTLS error lines",
                     rtp_packets=rtp, exit=rc, said=said, example=(dtls_errors[:1] or [""])[0][:200])


async def tls_refused(w: World) -> Result:
    """castd against the stack behind a TLS proxy with a self-signed certificate (castkit/tlsproxy.py)."""
    from castkit.castd_proc import castd_env, run_castd
    from castkit.tlsproxy import TLSProxy, make_certificate
    r = Result("TLS: self-signed endpoint refused", "HTTPS/WSS verified: a self-signed backend is refused with a clear "
                                                    "error and nothing reaches the API; with --dev-trust-certificate "
                                                    "(warned about) pairing and a cast work; a certificate for "
                                                    "another name is refused even with the flag (issue 8 §7)")
    d = w.out / "tls"
    good = make_certificate(d, "IP:127.0.0.1", "self-signed")
    other = make_certificate(d, "DNS:elsewhere.test", "other-name")
    figs: dict = {}
    async with TLSProxy("127.0.0.1", w.port, good) as p:
        env = castd_env(w.stack, d / "state", CASTD_API_URL=p.url, CASTD_SUPABASE_URL=p.url)
        rc, out, err = await run_castd(env, "pair", "--pin", "482913")
        (d / "refused.log").write_text(out + err)
        refused = (rc == 1 and "certificate of 127.0.0.1 was not accepted: self-signed certificate" in err
                   and p.upstream_connections == 0 and p.bytes_up == 0 and "WARNING" not in err)
        figs["refused"] = {"exit": rc, "said": err.strip()[-200:], "handshakes_failed": p.handshakes_failed,
                           "bytes_to_gateway": p.bytes_up}
    async with TLSProxy("127.0.0.1", w.port, other) as p:
        env = castd_env(w.stack, d / "state", CASTD_API_URL=p.url, CASTD_SUPABASE_URL=p.url)
        rc, out, err = await run_castd(env, "pair", "--pin", "482913", "--dev-trust-certificate", str(other.cert))
        (d / "mismatch.log").write_text(out + err)
        mismatch = rc == 1 and "mismatch" in err and p.upstream_connections == 0
        figs["name_mismatch_with_flag"] = {"exit": rc, "said": err.strip().splitlines()[-1][-200:] if err.strip() else ""}
    async with TLSProxy("127.0.0.1", w.port, good) as p:
        extra = {"CASTD_API_URL": p.url, "CASTD_SUPABASE_URL": p.url, "CASTD_DEV_TRUST_CERTIFICATE": str(good.cert)}
        async with casting(w, r.name, extra_env=extra) as c:
            warned = any("castd: WARNING: development mode" in l for l in c.daemon.stderr_lines)
            pair_warned = "castd: WARNING: development mode" in (c.dir / "pair.log").read_text()
            frames = len((await c.report())["frames"])
            cast = warned and pair_warned and frames >= 30 and p.upstream_connections >= 3 and p.bytes_down > 0
            figs["with_flag"] = {"frames": frames, "tls_connections": p.handshakes_ok, "bytes_from_gateway": p.bytes_down}
    ok = refused and mismatch and cast
    return check(r, ok, f"without the flag: exit {figs['refused']['exit']}, {figs['refused']['bytes_to_gateway']} bytes "
                        f"to the gateway; another name with the flag: exit {figs['name_mismatch_with_flag']['exit']}; "
                        f"with the flag: {figs['with_flag']['frames']} frames over "
                        f"{figs['with_flag']['tls_connections']} TLS connections", **figs)
