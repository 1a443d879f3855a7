"""Trickle ICE for aiortc peers: aiortc gathers before it returns a description
and puts every candidate into the SDP; the contract (spec §6, §8) sends them as
separate ice_candidate rows followed by endOfCandidates. These helpers split a
complete description into that form and apply remote rows to an aiortc peer.
"""
from __future__ import annotations

from aiortc import RTCPeerConnection
from aiortc.sdp import candidate_from_sdp


def split_candidates(sdp: str) -> tuple[str, list[dict]]:
    """The SDP without a=candidate / a=end-of-candidates lines, and the candidates
    of the first m-section (with max-bundle every section shares its transport)
    as row payload fields {candidate, sdpMid, sdpMLineIndex, usernameFragment}
    (docs/contract.md "Signaling rows", ice_candidate)."""
    lines = sdp.splitlines()
    section = [-1] * len(lines)  # m-section index of each line (-1: session level)
    m = -1
    for i, line in enumerate(lines):
        if line.startswith("m="):
            m += 1
        section[i] = m
    first_mid = next((ln[len("a=mid:"):] for ln, s in zip(lines, section) if s == 0 and ln.startswith("a=mid:")), "0")
    kept = [ln for ln in lines if not ln.startswith(("a=candidate:", "a=end-of-candidates"))]
    ufrags = [ln[len("a=ice-ufrag:"):] for ln, s in zip(lines, section) if s in (-1, 0) and ln.startswith("a=ice-ufrag:")]
    cands = [{"candidate": ln[2:], "sdpMid": first_mid, "sdpMLineIndex": 0}
             for ln, s in zip(lines, section) if s == 0 and ln.startswith("a=candidate:")]
    if ufrags:
        for c in cands:
            c["usernameFragment"] = ufrags[-1]
    return "\r\n".join(kept) + "\r\n", cands


async def add_remote_candidate(pc: RTCPeerConnection, payload: dict) -> None:
    """Applies an ice_candidate row payload (or its endOfCandidates form) to pc."""
    if payload.get("endOfCandidates"):
        await pc.addIceCandidate(None)
        return
    text = payload.get("candidate") or ""
    if not text:
        return
    c = candidate_from_sdp(text.split(":", 1)[1] if text.startswith("candidate:") else text)
    c.sdpMid = payload.get("sdpMid")
    c.sdpMLineIndex = payload.get("sdpMLineIndex")
    await pc.addIceCandidate(c)
