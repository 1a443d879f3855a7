"""Issue 19: under systemd (JOURNAL_STREAM set) castd logs to the journal, one entry per event
with one field per key: CASTD_EVENT, CASTD_LEVEL, CASTD_<KEY>, PRIORITY from the level, MESSAGE the
whole line. A real systemd-journald (castkit/private_journal.py) receives them and journalctl
selects them by field. A receiver row whose type tries to forge a field stays one field of one entry."""
import os

import pytest

from castkit import castd_log
from castkit.castd_proc import Receiver, castd_env, pair
from castkit.private_journal import JournalDaemon
from castkit.xscreen import XScreen

FORGED = "x\nCASTD_EVENT=forged\nPRIORITY=0"


@pytest.mark.timeout(90)
async def test_castd_logs_one_journal_entry_per_event_with_a_field_per_key(stack, tmp_path):
    if os.geteuid() != 0:
        pytest.fail("this test runs journald in a private mount namespace and needs root (CI runs as root)")
    screen = await XScreen(320, 240).start()
    rx, rc, _, raw = await pair(stack, tmp_path)
    assert rc == 0, raw
    sid = rx.session["sessionId"]
    daemon = await JournalDaemon.start_in(tmp_path / "journal-ns", castd_env(stack, tmp_path, DISPLAY=screen.display), sid)
    try:
        negotiate = await daemon.wait_entry("CASTD_EVENT=negotiate", timeout=30)
        await rx.client.insert({"session_id": sid, "sender_role": "receiver", "recipient_role": "sender",
                                "message_type": FORGED, "payload": {}})
        await daemon.wait_entry("CASTD_EVENT=row_ignored", timeout=15)
        daemon.signal()
        rc, _ = await daemon.wait(timeout=15)
    finally:
        await daemon.kill()
        await rx.client.close()
        screen.stop()
    assert rc == 0, daemon.stderr_lines[-20:]
    # The session machine's own event, with its own fields (not `event=session detail=…`).
    assert negotiate["PRIORITY"] == "6" and negotiate["CASTD_LEVEL"] == "info"
    assert negotiate["CASTD_ATTEMPT"] == "0" and len(negotiate["CASTD_NEGOTIATION"]) >= 8
    assert castd_log.parse(negotiate["MESSAGE"]) == {"level": "info", "event": "negotiate",
                                                     "negotiation": negotiate["CASTD_NEGOTIATION"], "attempt": "0"}
    # The hostile type is one escaped field of one warning; no entry claims to be "forged".
    [ignored] = daemon.entries("CASTD_EVENT=row_ignored")
    assert ignored["PRIORITY"] == "4" and ignored["CASTD_TYPE"] == r"x\nCASTD_EVENT=forged\nPRIORITY=0"
    assert castd_log.parse(ignored["MESSAGE"])["type"] == FORGED
    assert not daemon.entries("CASTD_EVENT=forged") and not daemon.entries("PRIORITY=0")
    # The end: a notice with the exit code and the sentence as fields.
    [finish] = daemon.entries("CASTD_EVENT=finish")
    assert (finish["PRIORITY"], finish["CASTD_EXIT"], finish["CASTD_MESSAGE"]) == ("5", "0", "Cast stopped.")
    # Every entry is a castd event whose MESSAGE parses to the same fields the entry carries.
    entries = daemon.entries()
    assert len(entries) >= 5
    for e in entries:
        f = castd_log.parse(e["MESSAGE"])
        assert f is not None and e["CASTD_EVENT"] == f["event"] and e["CASTD_LEVEL"] == f["level"], e
    # Nothing of it went to stderr: only the user's sentences do.
    assert not castd_log.events(daemon.stderr_lines), daemon.stderr_lines[-10:]
