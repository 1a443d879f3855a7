"""Issue 17: mid-cast, the receiver inserts a second `join_approved` addressed to the sender
(RLS allows it) whose `senderAuthExpiresAt` is 9999-12-31. castd trapped (SIGILL) on converting
that time; now it ignores the row (logged, counted), keeps casting, and ends cleanly."""
import asyncio

from castkit.castd_proc import start_cast


async def test_a_second_approval_from_the_year_9999_is_ignored_and_the_cast_goes_on(stack, tmp_path):
    rx, sid, answerer, daemon = await start_cast(stack, tmp_path)
    try:
        await daemon.wait_event("connected", timeout=30)
        await answerer.signals.send("join_approved", {
            "senderAuthExpiresAt": "9999-12-31T23:59:59.999Z",
            "streamPrefs": {"autoQuality": True, "resolution": "720p", "frameRate": 2**62}})
        await daemon.wait_event("row_ignored", timeout=10, type="join_approved")
        ignored = daemon.events("row_ignored", type="join_approved")
        assert [(e["level"], e["why"]) for e in ignored] == [("warning", "already approved")], \
            "\n".join(daemon.stderr_lines[-20:])
        # Still alive and still casting: a stats line with more frames sent comes after the row.
        stats_before = len(daemon.events("stats"))

        async def next_stats():
            while len(daemon.events("stats")) <= stats_before:
                assert daemon.proc.returncode is None, "\n".join(daemon.stderr_lines[-20:])
                await asyncio.sleep(0.1)
        await asyncio.wait_for(next_stats(), 15)
        daemon.signal()
        rc, out = await daemon.wait(timeout=5)
        assert rc == 0, "\n".join(daemon.stderr_lines[-20:])   # not -4 (SIGILL)
        row = await answerer.signals.wait_row(lambda r: r["message_type"] == "disconnect", timeout=5)
        assert row["payload"] == {"reason": "sender_ended"}
    finally:
        await daemon.kill()
        await answerer.close()
        await rx.client.close()
