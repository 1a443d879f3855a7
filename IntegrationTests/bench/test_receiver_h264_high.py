"""The bench receiver's High-against-Baseline switch (receiver.accepting_h264_high): inside
it an aiortc answerer takes H.264 Constrained High when an offer puts it first, as castd's
`--h264-profile high` does; outside it aiortc answers Constrained Baseline only, and its
codec list is back as it was."""

import aiortc.codecs as aiortc_codecs
from aiortc import RTCPeerConnection, RTCSessionDescription

from castkit.bench import receiver

# castd's offer for --h264-profile high, cut to what aiortc reads: High (106) before
# Constrained Baseline (102), each with its RTX.
OFFER = "\r\n".join([
    "v=0", "o=- 1 1 IN IP4 127.0.0.1", "s=-", "t=0 0", "a=group:BUNDLE 0",
    "m=video 9 UDP/TLS/RTP/SAVPF 106 107 102 103", "c=IN IP4 0.0.0.0",
    "a=ice-ufrag:abcd", "a=ice-pwd:abcdefghijklmnopqrstuvwx",
    "a=fingerprint:sha-256 " + ":".join(["AB"] * 32), "a=setup:actpass", "a=mid:0", "a=sendonly",
    "a=rtcp-mux", "a=msid:castd video",
    "a=rtpmap:106 H264/90000", "a=fmtp:106 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=640c1f",
    "a=rtcp-fb:106 nack", "a=rtcp-fb:106 nack pli",
    "a=rtpmap:107 rtx/90000", "a=fmtp:107 apt=106",
    "a=rtpmap:102 H264/90000", "a=fmtp:102 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f",
    "a=rtcp-fb:102 nack", "a=rtcp-fb:102 nack pli",
    "a=rtpmap:103 rtx/90000", "a=fmtp:103 apt=102",
    "a=ssrc:1111 cname:castd", "",
])


async def answered_h264() -> list[str]:
    """The H.264 payload types of aiortc's answer to OFFER, in its order."""
    pc = RTCPeerConnection()
    try:
        await pc.setRemoteDescription(RTCSessionDescription(OFFER, "offer"))
        answer = await pc.createAnswer()
    finally:
        await pc.close()
    m = next(l for l in answer.sdp.split("\r\n") if l.startswith("m=video"))
    h264 = {l.split()[0][len("a=rtpmap:"):] for l in answer.sdp.split("\r\n") if l.endswith(" H264/90000")}
    return [pt for pt in m.split()[3:] if pt in h264]


async def test_the_answerer_takes_high_first_only_inside_the_switch():
    before = list(aiortc_codecs.CODECS["video"])
    assert await answered_h264() == ["102"]
    with receiver.accepting_h264_high():
        assert await answered_h264() == ["106", "102"]
    assert aiortc_codecs.CODECS["video"] == before
    assert await answered_h264() == ["102"]
