"""castkit.faults.checks.secret_hits, the fault run's "secrets in logs" row: a 6-digit PIN that equals
a measured value of castd's debug log by chance is no leak; a PIN anywhere else, and any token,
is one."""
from castkit.faults.checks import secret_hits

PIN = "482913"


def test_a_pin_as_a_measured_value_or_inside_a_longer_number_is_not_a_hit():
    log = ("level=debug event=bandwidth_estimate bps=482913\n"
           "level=debug event=rate_target t_ms=31482913 media_kbps=482913 usage=normal\n"
           "level=info event=stats kbytes_sent=1482913 capture_ms=482913\n")
    assert secret_hits(log, PIN) == 0


def test_a_pin_standing_alone_or_under_another_key_is_a_hit():
    assert secret_hits("level=info event=pair pin=482913", PIN) == 1
    assert secret_hits('{"pin":"482913"}', PIN) == 1
    assert secret_hits("castd pair --pin 482913", PIN) == 1
    assert secret_hits("bps=482913 and then 482913", PIN) == 1


def test_tokens_are_found_anywhere():
    token = "eyJhbGciOiJIUzI1NiJ9.e30.sig"
    assert secret_hits(f"Authorization: Bearer {token}", token) == 1
    assert secret_hits(f"bps={token}", token) == 1
    assert secret_hits("nothing here", token) == 0
