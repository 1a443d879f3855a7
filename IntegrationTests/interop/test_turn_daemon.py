"""The daemon through coturn (turn_cast.py): `castd pair` and `castd --session` against the
local stack whose ice-config carries coturn's REST credentials, castd and aiortc each
behind its own symmetric NAT with no direct path. castd's selected pair must be `relay`
(its log), the bars of the Xvfb screen must arrive at 1080p, and coturn must have seen the
allocation and the channel. The Chromium rows and the faults are in IntegrationTests/castkit/faults/turn.py.
"""
import pytest

from castkit.turn_cast import Stack, TurnCast
from castkit.turn_world import TurnWorld
from castkit.xscreen import BARS, XScreen

pytestmark = pytest.mark.skipif(TurnWorld.available() is not None, reason=TurnWorld.available() or "")


@pytest.mark.timeout(150)
async def test_the_daemon_casts_through_coturn_across_two_symmetric_nats(tmp_path):
    with TurnWorld() as world:
        stack = Stack(world, tmp_path).up()
        screen = await XScreen(1920, 1080).start()
        cast = TurnCast(world, stack, screen.display, tmp_path / "cast")
        try:
            await cast.start()
            first = await cast.wait_frames(1, timeout=60)
            # Frames keep coming through the relay (a handful: the rate is the faults rows' business,
            # a debug build on this shared machine captures 1080p at a few frames per second).
            await cast.wait_frames(3, timeout=30, since=first)
            bars = await cast.rx.cmd(cmd="bars")
        finally:
            await cast.stop()
            screen.stop()
            stack.down()
        assert bars["size"] == [1920, 1080], bars
        for got, want in zip(bars["bars"], BARS):
            assert max(abs(g - w) for g, w in zip(got, want)) <= 12, (bars, BARS)
        pairs = cast.selected_pairs()
        assert pairs and pairs[-1].get("local_type") == "relay", cast.lines("selected_pair")
        assert cast.lines("turn_allocated"), cast.daemon.stderr_lines[-40:]
        log = world.coturn_log()
        assert "ALLOCATE processed, success" in log, log[-3000:]
        assert "CHANNEL_BIND processed, success" in log, log[-3000:]
