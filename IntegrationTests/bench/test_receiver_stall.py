"""The bench receiver's recovery from a frame that can never be completed (receiver.py, its
fifth change): it restarts its jitter buffer at the next H.264 or VP8 key frame, as Chromium's
receiver drops what it cannot decode once it has asked for one."""
from aiortc.rtp import RtpPacket

from castkit.bench import receiver


def packet(seq: int, ts: int, payload: bytes, marker: bool = True) -> RtpPacket:
    p = RtpPacket(payload_type=102, sequence_number=seq, timestamp=ts, marker=marker, payload=payload)
    p._data = payload       # aiortc's receiver sets the depacketized bytes before the jitter buffer
    return p


P_SLICE = bytes([0x41, 0x9A])                       # a single NAL unit, type 1 (non-IDR slice)
SPS = bytes([0x67, 0x42])                           # type 7
STAP_A_SPS = bytes([0x78, 0x00, 0x02, 0x67, 0x42])  # STAP-A whose first unit is an SPS
FU_A_IDR_START = bytes([0x7C, 0x85, 0x00])          # FU-A, S bit, type 5
FU_A_IDR_MIDDLE = bytes([0x7C, 0x05, 0x00])
FU_A_P_START = bytes([0x7C, 0x81, 0x00])


def test_key_frame_starts_are_recognised_and_nothing_else():
    assert receiver.starts_h264_keyframe(SPS) and receiver.starts_h264_keyframe(STAP_A_SPS)
    assert receiver.starts_h264_keyframe(FU_A_IDR_START) and receiver.starts_h264_keyframe(bytes([0x65, 0x88]))
    for other in (P_SLICE, FU_A_IDR_MIDDLE, FU_A_P_START, bytes([0x78, 0x00, 0x02, 0x41, 0x9A]), b"\x67"):
        assert not receiver.starts_h264_keyframe(other), other


def test_a_stalled_buffer_restarts_at_the_next_key_frame():
    jb = receiver.MarkerJitterBuffer(capacity=128, is_video=True)
    assert jb.add(packet(100, 1000, P_SLICE))[1].timestamp == 1000
    # packet 101 is lost: the frame at 1100 (101-102) can never complete, and the buffer waits for it
    assert jb.add(packet(102, 1100, P_SLICE))[1] is None
    assert jb.add(packet(103, 1200, P_SLICE))[1] is None
    jb.restart_at_keyframe(receiver.starts_h264_keyframe)
    assert jb.add(packet(104, 1300, P_SLICE))[1] is None           # not a key frame: dropped
    assert jb.add(packet(105, 1400, FU_A_IDR_START, marker=False))[1] is None
    frame = jb.add(packet(106, 1400, FU_A_IDR_MIDDLE))[1]
    assert frame is not None and frame.timestamp == 1400 and not jb.waiting_for_keyframe
    assert jb.add(packet(107, 1500, P_SLICE))[1].timestamp == 1500  # and on from there


# VP8 (RFC 7741): descriptor, then the payload header whose low bit P is 0 on a key frame
VP8_KEY = bytes([0x10, 0x00])                            # S, partition 0, no extension
VP8_DELTA = bytes([0x10, 0x01])
VP8_KEY_PICTURE_ID_15 = bytes([0x90, 0x80, 0x81, 0x23, 0x00])   # X, I; PictureID with M
VP8_KEY_PICTURE_ID_7 = bytes([0x90, 0x80, 0x05, 0x00])
VP8_KEY_ILT = bytes([0x90, 0xE0, 0x85, 0x23, 0x07, 0x20, 0x00])  # I (15 bits), L, T
VP8_CONTINUATION = bytes([0x80, 0x80, 0x81, 0x23, 0x00])        # S clear: not a frame's start


def test_vp8_key_frame_starts_are_recognised_and_nothing_else():
    for key in (VP8_KEY, VP8_KEY_PICTURE_ID_15, VP8_KEY_PICTURE_ID_7, VP8_KEY_ILT):
        assert receiver.starts_vp8_keyframe(key), key
    for other in (VP8_DELTA, bytes([0x90, 0x80, 0x81, 0x23, 0x01]), VP8_CONTINUATION,
                  bytes([0x11, 0x00]),                   # S but partition 1
                  bytes([0x90, 0x80, 0x81]), b"\x10"):   # cut short
        assert not receiver.starts_vp8_keyframe(other), other


def test_a_stalled_vp8_buffer_restarts_at_the_next_vp8_key_frame():
    jb = receiver.MarkerJitterBuffer(capacity=128, is_video=True)
    assert jb.add(packet(10, 100, VP8_KEY))[1].timestamp == 100
    assert jb.add(packet(12, 300, VP8_DELTA))[1] is None   # 11 lost: waits for it
    jb.restart_at_keyframe(receiver.starts_vp8_keyframe)
    assert jb.add(packet(13, 400, VP8_DELTA))[1] is None   # dropped until a key frame
    assert jb.add(packet(14, 500, VP8_KEY_PICTURE_ID_15, marker=False))[1] is None
    frame = jb.add(packet(15, 500, VP8_CONTINUATION))[1]
    assert frame is not None and frame.timestamp == 500 and not jb.waiting_for_keyframe
