"""castkit.castd_log reads castd's log lines back into fields (the Python twin of
LogLine.parse in Sources/CastCore/LogLine.swift); these lines are written the way castd writes them."""
from castkit import castd_log


def test_a_plain_line_gives_its_fields_in_order():
    f = castd_log.parse("level=notice event=reconnect attempt=1 delay_s=1.0")
    assert f == {"level": "notice", "event": "reconnect", "attempt": "1", "delay_s": "1.0"}
    assert list(f) == ["level", "event", "attempt", "delay_s"]


def test_quoted_values_are_unescaped_and_a_forged_event_stays_inside_its_field():
    line = r'level=warning event=row_ignored type="a b\"c\\d\nlevel=error event=forged" why="" esc="\x1b[31m\x85\u2028"'
    f = castd_log.parse(line)
    assert f["event"] == "row_ignored" and f["level"] == "warning"
    assert f["type"] == 'a b"c\\d\nlevel=error event=forged'
    assert f["why"] == ""
    assert f["esc"] == "\x1b[31m\x85\u2028"


def test_lines_that_are_not_castd_events_give_none():
    for line in ["", "castd: WARNING: development mode", "event=x level=info", "level=info event=x  a=1",
                 'level=info event=x a="open', r'level=info event=x a="\q"', r'level=info event=x a="\x4"',
                 "level=info event=x a=", "level=info event=x a=b=c", "Fatal error: x"]:
        assert castd_log.parse(line) is None, line


def test_events_select_by_name_and_fields():
    lines = ["level=info event=negotiate negotiation=nid-1 attempt=0",
             "level=notice event=reconnect attempt=1 delay_s=1.0",
             "level=info event=negotiation_timeout negotiation=nid-1",
             "level=info event=negotiate negotiation=nid-2 attempt=1",
             "not a log line"]
    assert [e["negotiation"] for e in castd_log.events(lines, "negotiate")] == ["nid-1", "nid-2"]
    assert castd_log.events(lines, "negotiate", attempt=1) == [castd_log.parse(lines[3])]
    assert len(castd_log.events(lines)) == 4


def test_numbers_keeps_the_integer_fields():
    f = castd_log.parse("level=info event=stats frames_sent=300 bitrate_kbps=-1 codec=h264 fps=29.5")
    assert castd_log.numbers(f) == {"frames_sent": 300, "bitrate_kbps": -1}
