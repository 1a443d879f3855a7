"""Smoke tests of Scripts/bench --bottleneck's parts (a benchmark is never pass/fail on its
figures): the metrics read a recorded getStats / timecode sample; tbf and the loss rule are
set, changed and removed with their namespaces; Chromium's canvas sender pairs through the
local stack and its frames reach the Chromium receiver through the link (a short run of the
bench itself, libwebrtc only: it needs no castd build)."""
import json
import os
import subprocess
from pathlib import Path

import pytest

from castkit.bench import bottleneck_metrics as bm
from castkit.bench import timecode
from castkit.bottleneck_link import BottleneckLink, burst_bytes, parse_tc_stats

ROOT = Path(__file__).resolve().parents[2]

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces and tc need root")


def code_bytes(t_s: float, frame: int) -> list[int]:
    """What the viewer hook hands back for a frame whose timecode was drawn at t_s."""
    bits = timecode.encode(int(t_s * 1e6), frame)
    return [sum(bits[8 * i + j] << j for j in range(8)) for i in range(6)]


# A getStats sample as window.castdViewer.stats gives it (trimmed), with the monotonic "t"
# the receiver process adds: 1 s apart, 30 frames and 250 kB a second, 2 packets lost of 200.
def stats_at(i: int, *, lost: int = 0, freezes: int = 0, width: int = 1920) -> dict:
    return {"t": 100.0 + i, "framesDecoded": 30 * i, "bytesReceived": 250_000 * i, "packetsReceived": 200 * i,
            "packetsLost": lost, "freezeCount": freezes, "totalFreezesDuration": 0.5 * freezes,
            "frameWidth": width, "frameHeight": width * 9 // 16, "roundTripTimeMs": 40 + i, "nackCount": lost,
            "pliCount": 0, "retransmittedPacketsReceived": lost, "qpSum": 30 * i * 24 + (i >= 5) * 300}


def test_timecode_round_trip_and_torn_code_rejected():
    t = 1234.567891
    assert bm.decode_timecode(code_bytes(t, 7), t + 0.05) == pytest.approx(t, abs=1e-6)
    torn = code_bytes(t, 7)
    torn[1] ^= 0x10
    assert bm.decode_timecode(torn, t + 0.05) is None
    assert bm.decode_timecode(None, t) is None


def test_summary_of_a_recorded_sample():
    stats = [stats_at(i, lost=2 * (i >= 5), freezes=int(i >= 7)) for i in range(11)]
    # 30 frames a second for 10 s, each shown 80 ms after its code was drawn, but none in [106, 107.5)
    frames = [(100 + k / 30, code_bytes(100 + k / 30 - 0.08, k)) for k in range(300)
              if not 106 <= 100 + k / 30 < 107.5]
    s = bm.summarize(frames, stats, [], [(100.0, 2000)], 101.0, 110.0)
    assert s["delivered_mbps"] == pytest.approx(2.0, rel=1e-3)
    assert s["decoded_fps"] == pytest.approx(30.0)
    assert s["packets_lost"] == 2 and s["loss_percent"] == pytest.approx(100 * 2 / 1802, abs=0.01)
    assert s["freezes"] == 1 and s["freezes_s"] == 0.5
    assert s["glass_to_glass_ms_median"] == pytest.approx(80, abs=0.5)
    assert s["fps_worst_second"] == 0 and 24 < s["fps_mean"] < 26
    assert s["gaps_over_1s"] and s["gaps_over_1s"][0] == pytest.approx(1.5, abs=0.05)
    assert s["resolution"] == "1920x1080" and s["readable_timecode_fraction"] == 1.0
    assert s["rtt_ms_median"] == 46
    # QP 24 on every frame, and 300 more spread over the window's 270 frames
    assert s["decoder_qp_mean"] == pytest.approx(24 + 300 / 270, abs=0.01)


def test_settle_times_after_a_step_down_and_up():
    steps = [(0.0, 8000), (10.0, 1500), (20.0, 8000)]
    # the queue drains to 10 ms three seconds after the step down
    link = [{"t": 10 + k * 0.25, "rate_kbit": 1500, "backlog_bytes": 30_000 if k < 12 else 1_875}
            for k in range(40)]
    # 7.5 Mbit/s on the first segment; 1.2 until t = 26, then 7 Mbit/s (≥ 80 % of 7.5)
    rates = [(k, 7.5) for k in range(1, 10)] + [(20 + k, 1.2 if 20 + k < 26 else 7.0) for k in range(1, 10)]
    down, up = bm.settle_times(steps, link, rates, 30.0)
    assert down["kind"] == "down" and down["settle_s"] == 3.0
    assert up["kind"] == "up" and up["settle_s"] == 6.0 and up["reference_mbps"] == 7.5
    # a sender that delivered 3.5 Mbit/s before the step down has settled at 2.8 (80 % of 3.5), not 6.4
    capped = bm.settle_times(steps, link, [(k, 3.5) for k in range(1, 10)] + [(24, 2.0), (25, 3.0)], 30.0)[1]
    assert capped["reference_mbps"] == 3.5 and capped["settle_s"] == 5.0
    assert bm.targets_steps({"settle": [down, up]}) == {
        "queue < 50 ms within 5 s of the step down": True, ">= 80 % of capacity within 10 s of the step up": True}
    never = bm.settle_times(steps, [{**x, "backlog_bytes": 30_000} for x in link], [(21, 1.0)], 30.0)
    assert never[0]["settle_s"] is None and never[1]["settle_s"] is None


def test_each_fall_is_judged_on_its_own_frames():
    steps = [(0.0, 4400), (10.0, 1200), (13.0, 4400), (16.0, 1200), (19.0, 4400)]
    # 30 frames a second at 40 ms; after the first fall 300 ms until 10.6 s, then 90 ms (under the
    # bound) but one frame at 150 ms at 11.5 s; after the second 180 ms until 16.4 s, and no frame
    # in [17.0, 18.2)
    def g2g(t: float) -> float:
        if 10 <= t < 10.6:
            return 0.3
        if 10.6 <= t < 13:
            return 0.15 if abs(t - 11.5) < 0.01 else 0.09
        if 16 <= t < 16.4:
            return 0.18
        return 0.04
    frames = [(t, code_bytes(t - g2g(t), k)) for k in range(600) if not 17.0 <= (t := k / 30) < 18.2]
    first, second = bm.falls(frames, steps, 20.0)
    assert first["at_s"] == 10.0 and first["to_kbit"] == 1200
    assert first["drained_s"] == pytest.approx(1.53, abs=0.02)     # the frame after the 150 ms one
    assert first["worst_after_1s_ms"] == pytest.approx(150, abs=0.5)
    assert second["drained_s"] == pytest.approx(0.4, abs=0.02) and second["worst_after_1s_ms"] == pytest.approx(40, abs=0.5)
    assert second["longest_gap_s"] == pytest.approx(1.2, abs=0.04)
    # the step up is not a fall, and a segment whose last frame is still slow has not drained
    assert len(bm.falls(frames, steps, 20.0)) == 2
    assert bm.falls(frames, steps[:2], 10.5)[0]["drained_s"] is None


def test_each_fall_reads_tbfs_queue_apart_from_the_frames_time_on_the_link():
    steps = [(0.0, 4400), (10.0, 1200), (13.0, 4400), (16.0, 1200), (19.0, 4400)]
    frames = [(k / 30, code_bytes(k / 30 - 0.04, k)) for k in range(600)]
    # tbf's backlog in ms of its rate, four samples a second: the first fall fills it to 200 ms
    # at 10.5 s, it is under 50 ms (QUEUE_EMPTY_MS) at 11.25 s, and a frame in flight reads 70 ms
    # at 11.5 s; the second fall's queue stays over 50 ms until the step up; the step up (13 s)
    # is not a fall
    def q(t: float) -> float:
        if 10 <= t < 13:
            return {10.0: 0, 10.25: 120, 10.5: 200, 10.75: 90, 11.0: 60, 11.25: 30, 11.5: 70}.get(t, 0)
        if 16 <= t < 19:
            return 150 if t == 16.5 else 60
        return 0
    def sample(t: float) -> dict:
        rate = next(r for at, r in reversed(steps) if at <= t)
        return {"t": t, "rate_kbit": rate, "backlog_bytes": round(q(t) * rate / 8)}
    link = [sample(k / 4) for k in range(80)]
    first, second = bm.falls(frames, steps, 20.0, link=link)
    assert first["queue_peak_ms"] == pytest.approx(200, abs=0.5)
    assert first["queue_emptied_s"] == pytest.approx(1.25)      # after the peak, not the 0 at the fall
    # from 11 s to the step up: 60, 30, 70 and five zeros
    assert first["queue_after_1s_ms"] == pytest.approx(160 / 8, abs=0.1)
    assert second["queue_peak_ms"] == pytest.approx(150, abs=0.5) and second["queue_emptied_s"] is None
    # without tbf samples (a free link) the queue is not judged
    assert "queue_peak_ms" not in bm.falls(frames, steps, 20.0)[0]


def test_tc_statistics_parsed():
    text = ("qdisc tbf 8001: root refcnt 2 rate 2Mbit burst 5000b lat 200ms\n"
            " Sent 1234567 bytes 2345 pkt (dropped 17, overlimits 99 requeues 0)\n backlog 41240b 28p requeues 0\n")
    assert parse_tc_stats(text) == {"qdisc": "tbf", "sent_bytes": 1234567, "sent_packets": 2345, "drops": 17,
                                    "backlog_bytes": 41240, "backlog_packets": 28}
    assert burst_bytes(2000) == 5000 and burst_bytes(80_000) == 50_000


@root_only
def test_tbf_and_loss_set_changed_and_removed():
    with BottleneckLink() as link:
        link.set_rate(2000)
        shown = subprocess.run(["ip", "netns", "exec", link.ns_s, "tc", "qdisc", "show", "dev", link.dev_s],
                               capture_output=True, text=True).stdout
        assert "tbf" in shown and "rate 2Mbit" in shown and "lat 200ms" in shown, shown
        link.set_rate(1500)
        shown = subprocess.run(["ip", "netns", "exec", link.ns_s, "tc", "qdisc", "show", "dev", link.dev_s],
                               capture_output=True, text=True).stdout
        assert "rate 1500Kbit" in shown, shown
        link.set_loss(0.02)
        rules = subprocess.run(["ip", "netns", "exec", link.ns_s, "nft", "list", "table", "inet", "bottleneck"],
                               capture_output=True, text=True).stdout
        assert "numgen random mod 10000 < 200" in rules, rules
        link.set_loss(0)
        assert link.loss_dropped() == 0
        link.set_rate(None)
        assert link.backlog()["qdisc"] != "tbf"
        assert link.exists()
    assert not link.exists()


@root_only
@pytest.mark.long
@pytest.mark.timeout(240)
def test_canvas_sender_pairs_and_reaches_the_chromium_receiver(tmp_path):
    """Chromium's libwebrtc sender, signaled by Python, through the link on a free scenario, with
    the codec the bench puts first for it (VP8 by default: docs/rate-control.md)."""
    r = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), str(ROOT / "IntegrationTests" / "castkit" / "bench" / "bottleneck.py"),
                        "--sender", "libwebrtc", "--scenario", "free", "--seconds", "12", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=230, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads((tmp_path / "bottleneck.json").read_text())
    s = res["scenarios"][0]["libwebrtc"]
    assert "error" not in s, s
    assert s["libwebrtc"]["codec"] == "video/VP8", s["libwebrtc"]
    assert res["config"]["libwebrtc_codec"] == "vp8"
    assert s["resolution"] == "1920x1080" and s["delivered_mbps"] > 0.1
    assert s["fps_mean"] > 0 and s["glass_to_glass_ms_median"] is not None
    assert s["readable_timecode_fraction"] > 0.5
    assert res["off_machine"]["root_namespace"]["run_any"] == 0
    assert res["off_machine"]["sender_namespace_positive_control"]["run_any"] > 0
    assert (tmp_path / "bottleneck-free.png").exists()


@root_only
@pytest.mark.timeout(60)
@pytest.mark.parametrize("cc", ["cubic", "bbr"])
def test_the_bulk_tcp_download_fills_the_link_it_shares(cc):
    """The competing download of the *-tcp-* scenarios: through a 2 Mbit/s tbf link it takes
    nearly all of it, with the congestion control asked for."""
    with BottleneckLink() as link:
        link.set_rate(2000)
        r = subprocess.run(["ip", "netns", "exec", link.ns_s, str(ROOT / ".venv" / "bin" / "python"),
                            str(ROOT / "IntegrationTests" / "castkit" / "tcp_bulk.py"), "measure", link.ns_r, link.addr_r,
                            cc, "6"], capture_output=True, text=True, timeout=50)
        assert r.returncode == 0, r.stderr[-2000:]
        steady = json.loads(r.stdout)
        assert 1.6 < steady < 2.3, steady     # (100-ms bins at the window's edges: a few % either way)
