"""The fault rows read castd's own frames_sent counter from any cast's daemon log: the LAN
casts (`Cast`) and the TURN casts (`TurnCast`, which has a daemon but none of Cast's methods;
the TURN rows once called a Cast method on it and did not run)."""
from types import SimpleNamespace

from castkit.faults import turn
from castkit.faults.world import daemon_frames_sent, daemon_sent_fps


def daemon(*lines: tuple[float, str]):
    return SimpleNamespace(stderr_times=[t for t, _ in lines], stderr_lines=[l for _, l in lines])


def test_frames_sent_is_the_counters_difference_between_the_first_and_last_stats_line_in_the_window():
    d = daemon((1.0, "level=info event=stats captured=12 frames_sent=10 kbytes_sent=5"),
               (2.0, "level=info event=peer_state state=connected"),
               (6.0, "level=info event=stats captured=170 frames_sent=160"),
               (11.0, "level=info event=stats captured=320 frames_sent=310"))
    assert daemon_frames_sent(d, 0, 7) == (5.0, 150)
    assert daemon_sent_fps(d, 0, 12) == 30.0
    # Fewer than two stats lines in the window: no figure.
    assert daemon_frames_sent(d, 5, 7) is None and daemon_sent_fps(d, 5, 7) is None


def test_the_turn_rows_read_it_from_an_object_with_only_a_daemon():
    cast = SimpleNamespace(daemon=daemon((0.0, "level=info event=stats frames_sent=0"),
                                         (10.0, "level=info event=stats frames_sent=295")))
    assert turn.sent_fps(cast, 0, 10) == 29.5
