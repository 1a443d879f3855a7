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


def test_a_pin_inside_a_row_id_or_an_address_hash_is_not_a_hit():
    log = ("level=debug event=row type=ice_candidate id=7d1d23c9-2b88-49cd-97c7-e2a482913d75\n"
           "level=debug event=remote_candidate type=host address=v4#dd482913 transport=udp\n"
           "level=debug event=row type=answer id=8cc1fa98-611c-4091-8e83-0a14fa482913\n")
    assert secret_hits(log, PIN) == 0


def test_a_pin_standing_alone_or_under_another_key_is_a_hit():
    assert secret_hits("level=info event=pair pin=482913", PIN) == 1
    assert secret_hits('{"pin":"482913"}', PIN) == 1
    assert secret_hits("castd pair --pin 482913", PIN) == 1
    assert secret_hits("bps=482913 and then 482913", PIN) == 1
    assert secret_hits("pin=482913, id=-482913.", PIN) == 2


def test_tokens_are_found_anywhere():
    token = "eyJhbGciOiJIUzI1NiJ9.e30.sig"
    assert secret_hits(f"Authorization: Bearer {token}", token) == 1
    assert secret_hits(f"bps={token}", token) == 1
    assert secret_hits("nothing here", token) == 0
