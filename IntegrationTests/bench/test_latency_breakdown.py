"""The bench's glass-to-glass breakdown (IntegrationTests/castkit/bench/receiver.py, issue 19):
per frame, the receiver's records joined by RTP timestamp into stages that add up
to the latency; frames missing from a record are left out, not guessed."""

import pytest

from castkit.bench import bench, receiver


def sample(decoded, drawn, ts, read=None):
    return receiver.Sample(decoded, drawn, 1, 1920, 1080, ts, read)


def test_stages_add_up_to_the_latency_and_name_each_gap():
    # RTP timestamps as sent; the decoder and the decoded frame see them less the first frame's
    raw = 2**32 - 1000
    packets = [(9.990, 1000, raw - 3000), (10.020, 1000, raw), (10.025, 1000, raw), (10.027, 1000, raw),
               (10.040, 1000, raw)]   # a late copy of a packet the frame already had: not its last packet
    rows = receiver.breakdown([sample(10.060, 10.000, 0, read=10.062)], packets,
                              frames_out=[(10.028, raw), (10.062, 2000)], decodes=[(10.031, 10.050, 0)])
    assert len(rows) == 1
    r = rows[0]
    assert r["drawn_to_first_packet"] == pytest.approx(20)
    assert r["first_to_last_packet"] == pytest.approx(7)
    assert r["last_packet_to_jitter_out"] == pytest.approx(1)
    assert r["jitter_out_to_decode_start"] == pytest.approx(3)
    assert r["decode"] == pytest.approx(19)
    assert r["decode_end_to_consumer"] == pytest.approx(10)
    assert r["timecode_read"] == pytest.approx(2)
    assert sum(r[name] for name, _, _ in receiver.STAGES) == pytest.approx(r["glass_to_glass"]) == pytest.approx(60)


def test_frames_without_every_record_or_a_timecode_are_left_out():
    packets = [(1.0, 10, 5001), (2.0, 10, 5002), (3.0, 10, 5003)]
    frames_out = [(1.1, 5001), (2.1, 5002), (3.1, 5003)]
    decodes = [(1.2, 1.3, 0), (3.2, 3.3, 2)]   # the second frame never reached the decoder
    samples = [sample(1.4, 0.9, 0), sample(2.4, 1.9, 1), sample(3.4, None, 2), sample(4.4, 3.9, 3)]
    rows = receiver.breakdown(samples, packets, frames_out, decodes)
    assert [round(r["glass_to_glass"]) for r in rows] == [500]


def test_summary_gives_median_p95_and_mean_per_stage():
    rounds = [{"stages_ms": {"decode": [1.0, 2.0, 3.0]}}, {"stages_ms": {"decode": [10.0]}}]
    s = bench._summarize_stages(rounds)
    assert s == {"decode": {"p50": 3.0, "p95": 10.0, "mean": 4.0, "frames": 4}}
    assert bench._summarize_stages([{}]) is None
    assert receiver.breakdown([sample(1.0, 0.5, 0)], [], [], []) == []
