"""Runs inside a network namespace of its own (test_give_up.py starts it with
`ip netns exec`): loopback for the stack and signaling, and a second address on
the namespace's loopback device that castd and the aiortc receiver use for media. Once the cast
is up, an nftables rule in this namespace drops every UDP datagram on that
address: the media path is cut, signaling is not. Prints one JSON line with
what it observed."""
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from castkit.devstack import devstack_down, devstack_up
from castkit.castd_proc import Daemon, castd_env, pair
from castkit.receiver_answerer import ReceiverAnswerer

MEDIA_IP = "10.99.0.1"


def sh(*args):
    subprocess.run(args, check=True)


async def main(state_home: Path) -> dict:
    sh("ip", "link", "set", "lo", "up")
    # A second address on this namespace's loopback device: castd and aiortc take it
    # as a host candidate (it is not a 127/8 address); the stack stays on 127.0.0.1.
    sh("ip", "addr", "add", f"{MEDIA_IP}/32", "dev", "lo")
    stack = devstack_up()
    try:
        rx, rc, events, raw = await pair(stack, state_home)
        assert rc == 0, raw
        sid = rx.session["sessionId"]
        answerer = ReceiverAnswerer(rx.client, sid)
        await answerer.start()
        # Short ICE timers are not needed: castd's own §11 timings are what is measured.
        daemon = await Daemon.start(castd_env(stack, state_home), sid)
        await daemon.wait_event("connected", timeout=30)
        cut_at = time.monotonic()
        sh("nft", "add", "table", "inet", "castdcut")
        sh("nft", "add", "chain", "inet", "castdcut", "out", "{ type filter hook output priority 0; }")
        sh("nft", "add", "rule", "inet", "castdcut", "out", "ip", "daddr", MEDIA_IP, "meta", "l4proto", "udp", "drop")
        rc, out = await daemon.wait(timeout=150)
        ended_at = time.monotonic()
        rows = await rx.client.select(sid, "receiver")
        await answerer.close()
        await rx.client.close()
        log = daemon.stderr_lines
        return {
            "exit": rc, "said": [l for l in log if l.startswith("castd: ")], "seconds_after_cut": round(ended_at - cut_at, 1),
            "offers": [r["payload"]["negotiationId"] for r in rows if r["message_type"] == "offer"],
            "disconnect": [r["payload"] for r in rows if r["message_type"] == "disconnect"],
            "reconnects": daemon.events("reconnect"),
            "negotiations": daemon.events("negotiate"),
            "status_update_end": bool(daemon.events("session_update_failed", action="end")),
        }
    finally:
        devstack_down(stack.state_dir)


if __name__ == "__main__":
    result = asyncio.run(main(Path(sys.argv[1])))
    print("RESULT " + json.dumps(result), flush=True)
