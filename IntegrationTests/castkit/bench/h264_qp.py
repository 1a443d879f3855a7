"""The quantiser of each H.264 slice, read from its header (ITU-T H.264 §7.3.2.1, §7.3.2.2,
§7.3.3): SliceQP_Y = 26 + pic_init_qp_minus26 (PPS) + slice_qp_delta (slice header). This is
the figure a decoder reports as a frame's QP (Chromium's `qpSum` adds one per frame, from its
bitstream parser's slice header); aiortc reports none, so the quality rows' aiortc receiver reads
it here from the access units it hands its decoder.

    parser = SliceQP()
    qps = parser.access_unit(annexb_bytes)   # the QP of each slice in it, [] when none could be read

Parameter sets are kept from the stream (in band, as WebRTC senders put them before each IDR);
a slice whose PPS or SPS has not been seen, or whose header uses what this reader does not
follow (scaling matrices in the SPS, slice groups), gives no QP rather than a wrong one.
"""
from __future__ import annotations

HIGH_PROFILES = {100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135}
P, B, I, SP, SI = 0, 1, 2, 3, 4
HEADER_BYTES = 256


class _Bits:
    """An RBSP (emulation-prevention bytes removed), read MSB first."""

    def __init__(self, nal: bytes):
        self.data = nal.replace(b"\x00\x00\x03", b"\x00\x00")
        self.pos = 0

    def u(self, n: int) -> int:
        v = 0
        for _ in range(n):
            byte = self.data[self.pos >> 3]   # IndexError past the end: the caller gives up on the slice
            v = (v << 1) | ((byte >> (7 - (self.pos & 7))) & 1)
            self.pos += 1
        return v

    def ue(self) -> int:
        zeros = 0
        while self.u(1) == 0:
            zeros += 1
            if zeros > 31:
                raise ValueError("exp-Golomb code longer than 32 bits")
        return (1 << zeros) - 1 + self.u(zeros)

    def se(self) -> int:
        k = self.ue()
        return (k + 1) // 2 if k & 1 else -(k // 2)


def _nal_units(annexb: bytes):
    """The NAL units of an Annex B byte stream (start codes of 3 or 4 bytes)."""
    starts = []
    i = annexb.find(b"\x00\x00\x01")
    while i >= 0:
        starts.append(i + 3)
        i = annexb.find(b"\x00\x00\x01", i + 3)
    for k, s in enumerate(starts):
        end = starts[k + 1] - 3 if k + 1 < len(starts) else len(annexb)
        nal = annexb[s:end]
        if k + 1 < len(starts) and nal.endswith(b"\x00"):   # a 4-byte start code's leading zero
            nal = nal[:-1]
        if nal:
            yield nal


class SliceQP:
    def __init__(self) -> None:
        self.sps: dict[int, dict] = {}
        self.pps: dict[int, dict] = {}

    def access_unit(self, annexb: bytes) -> list[int]:
        qps = []
        for nal in _nal_units(annexb):
            kind = nal[0] & 0x1F
            try:
                if kind == 7:
                    self._sps(_Bits(nal[1:]))
                elif kind == 8:
                    self._pps(_Bits(nal[1:]))
                elif kind in (1, 5):
                    # The header is in the first bytes; the rest is the slice's data.
                    qp = self._slice(_Bits(nal[1:HEADER_BYTES]), idr=kind == 5, ref_idc=(nal[0] >> 5) & 3)
                    if qp is not None:
                        qps.append(qp)
            except (IndexError, ValueError):
                continue   # truncated or not understood: no figure from it
        return qps

    def _sps(self, b: _Bits) -> None:
        profile = b.u(8)
        b.u(16)                      # constraint flags, reserved bits, level
        sps_id = b.ue()
        s = {"separate_colour_plane": 0}
        if profile in HIGH_PROFILES:
            chroma = b.ue()
            if chroma == 3:
                s["separate_colour_plane"] = b.u(1)
            b.ue()
            b.ue()                   # bit depths
            b.u(1)                   # qpprime_y_zero_transform_bypass_flag
            if b.u(1):               # seq_scaling_matrix_present_flag: not followed here
                s["unsupported"] = True
        s["log2_max_frame_num"] = b.ue() + 4
        s["poc_type"] = b.ue()
        if s["poc_type"] == 0:
            s["log2_max_poc_lsb"] = b.ue() + 4
        elif s["poc_type"] == 1:
            s["delta_pic_order_always_zero"] = b.u(1)
            b.se()
            b.se()
            for _ in range(b.ue()):
                b.se()
        b.ue()                       # max_num_ref_frames
        b.u(1)                       # gaps_in_frame_num_value_allowed_flag
        b.ue()
        b.ue()                       # picture size in macroblocks
        s["frame_mbs_only"] = b.u(1)
        self.sps[sps_id] = s

    def _pps(self, b: _Bits) -> None:
        pps_id = b.ue()
        p = {"sps": b.ue(), "cabac": b.u(1), "bottom_field_poc": b.u(1)}
        if b.ue() != 0:              # num_slice_groups_minus1: slice groups not followed here
            p["unsupported"] = True
            self.pps[pps_id] = p
            return
        p["num_ref_idx_l0"] = b.ue() + 1
        p["num_ref_idx_l1"] = b.ue() + 1
        p["weighted_pred"] = b.u(1)
        p["weighted_bipred"] = b.u(2)
        p["pic_init_qp"] = 26 + b.se()
        b.se()                       # pic_init_qs_minus26
        b.se()                       # chroma_qp_index_offset
        b.u(1)                       # deblocking_filter_control_present_flag
        b.u(1)                       # constrained_intra_pred_flag
        p["redundant_pic_cnt"] = b.u(1)
        self.pps[pps_id] = p

    def _slice(self, b: _Bits, idr: bool, ref_idc: int) -> int | None:
        b.ue()                       # first_mb_in_slice
        slice_type = b.ue() % 5
        p = self.pps.get(b.ue())
        s = self.sps.get(p["sps"]) if p else None
        if p is None or s is None or p.get("unsupported") or s.get("unsupported"):
            return None
        if s["separate_colour_plane"]:
            b.u(2)
        b.u(s["log2_max_frame_num"])
        field = 0
        if not s["frame_mbs_only"]:
            field = b.u(1)
            if field:
                b.u(1)               # bottom_field_flag
        if idr:
            b.ue()                   # idr_pic_id
        if s["poc_type"] == 0:
            b.u(s["log2_max_poc_lsb"])
            if p["bottom_field_poc"] and not field:
                b.se()
        elif s["poc_type"] == 1 and not s["delta_pic_order_always_zero"]:
            b.se()
            if p["bottom_field_poc"] and not field:
                b.se()
        if p["redundant_pic_cnt"]:
            b.ue()
        if slice_type == B:
            b.u(1)                   # direct_spatial_mv_pred_flag
        l0, l1 = p["num_ref_idx_l0"], p["num_ref_idx_l1"]
        if slice_type in (P, SP, B):
            if b.u(1):               # num_ref_idx_active_override_flag
                l0 = b.ue() + 1
                if slice_type == B:
                    l1 = b.ue() + 1
        if slice_type not in (I, SI):   # ref_pic_list_modification (§7.3.3.1)
            for _ in range(2 if slice_type == B else 1):
                if b.u(1):
                    while (op := b.ue()) != 3:
                        if op > 5:
                            raise ValueError("modification_of_pic_nums_idc out of range")
                        b.ue()
        if (p["weighted_pred"] and slice_type in (P, SP)) or (p["weighted_bipred"] == 1 and slice_type == B):
            self._pred_weight_table(b, slice_type, l0, l1)
        if ref_idc:
            if idr:
                b.u(2)               # no_output_of_prior_pics_flag, long_term_reference_flag
            elif b.u(1):             # adaptive_ref_pic_marking_mode_flag
                while (op := b.ue()) != 0:
                    if op > 6:
                        raise ValueError("memory_management_control_operation out of range")
                    if op in (1, 3):
                        b.ue()
                    if op in (2, 3, 6):
                        b.ue()
                    if op == 4:
                        b.ue()
        if p["cabac"] and slice_type not in (I, SI):
            b.ue()                   # cabac_init_idc
        qp = p["pic_init_qp"] + b.se()
        return qp if 0 <= qp <= 51 else None

    @staticmethod
    def _pred_weight_table(b: _Bits, slice_type: int, l0: int, l1: int) -> None:
        # With chroma weights throughout: ChromaArrayType is 1 for the 4:2:0 streams senders send.
        b.ue()                       # luma_log2_weight_denom
        b.ue()                       # chroma_log2_weight_denom
        for n in ([l0, l1] if slice_type == B else [l0]):
            for _ in range(n):
                if b.u(1):           # luma weight and offset
                    b.se()
                    b.se()
                if b.u(1):           # chroma weights and offsets, Cb and Cr
                    for _ in range(4):
                        b.se()
