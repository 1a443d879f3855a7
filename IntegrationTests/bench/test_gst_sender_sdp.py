"""The bench's GStreamer sender offers H.264 as spec §7 asks (42e01f,
packetization-mode=1) whatever webrtcbin wrote for the fmtp."""

from castkit.bench.gst_sender import h264_fmtp

HEAD = "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\na=sendonly\r\na=rtpmap:96 H264/90000\r\n"


def fmtp(sdp: str) -> dict:
    [line] = [l for l in sdp.split("\r\n") if l.startswith("a=fmtp:96 ")]
    return dict(kv.split("=", 1) for kv in line.split(" ", 1)[1].split(";"))


def test_a_missing_fmtp_line_is_added_after_the_rtpmap():
    out = h264_fmtp(HEAD + "a=rtcp-fb:96 nack pli\r\n")
    lines = out.split("\r\n")
    assert lines[lines.index("a=rtpmap:96 H264/90000") + 1].startswith("a=fmtp:96 ")
    assert fmtp(out) == {"packetization-mode": "1", "profile-level-id": "42e01f", "level-asymmetry-allowed": "1"}


def test_the_level_from_the_sps_is_replaced_and_the_parameter_sets_kept():
    out = h264_fmtp(HEAD + "a=fmtp:96 packetization-mode=1;profile-level-id=42c028;sprop-parameter-sets=Z0LAKA==,aM48gA==\r\n")
    assert fmtp(out) == {"packetization-mode": "1", "profile-level-id": "42e01f", "level-asymmetry-allowed": "1",
                         "sprop-parameter-sets": "Z0LAKA==,aM48gA=="}
    assert out.count("a=fmtp:96") == 1
