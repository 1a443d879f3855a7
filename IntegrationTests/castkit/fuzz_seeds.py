"""Seed corpora for the libFuzzer targets (Fuzz/Seeds/<Name>/), taken from real traffic.

    sudo Scripts/fuzz-seeds [--out Fuzz/Seeds] [--seconds 6]

(the command is Scripts/fuzz_seeds.py; this module is what it calls: generate() and
leaked_tokens()). It starts a local stack (Scripts/devstack), casts with the
aiortc reference sender (castkit/ref_sender.py, H.264) to the aiortc answerer
(castkit/receiver_answerer.py) through the stack's signaling, asks the answerer for a PLI
and a FIR, and records on the loopback interface with an AF_PACKET socket (root):
  - UDP: STUN (ICE checks, the stack's STUN responder), DTLS records, SRTP/SRTCP;
  - TCP to the gateway: HTTP responses (REST/JSON bodies) and the Realtime WebSocket
    (upgrade answer, server frames, Phoenix messages).
aiortc's RTP and RTCP are also taken in the clear just before SRTP protects them. Added
to that: the real Chromium answers in Tests/CastWebRTCTests/Fixtures, the SDP both aiortc
peers exchanged, access units from ffmpeg's libx264 (the encoder castd links), and the
answers of castkit/mdns_responder.py. Each capture is cut to the input layout of its
target (see Fuzz/Sources/Fuzz*/), at most MAX_FILES files per target of at most
MAX_BYTES bytes each, named by their SHA-1 (libFuzzer's naming). Files named
regression-<sha1> (inputs of crashes found and fixed) are kept across regenerations.

Secrets: every JWT-shaped string becomes a fixed dummy JWT, refresh tokens and
passwords become dummies, so committed seeds hold no credential, even a throw-away one.
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import random
import re
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

MAX_FILES = 40
MAX_BYTES = 64 * 1024

# --------------------------------------------------------------------------- secrets


def _b64(d: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(d, separators=(",", ":")).encode()).rstrip(b"=").decode()


DUMMY_JWT = ".".join([
    _b64({"alg": "HS256", "typ": "JWT"}),
    _b64({"sub": "00000000-0000-4000-8000-000000000000", "role": "authenticated", "aud": "authenticated",
          "exp": 1893456000, "iat": 1767225600, "is_anonymous": True, "session_id": "fuzz-seed"}),
    "ZHVtbXktc2lnbmF0dXJlLW5vdC1hLXJlYWwtb25l",
])
JWT_RE = re.compile(r"eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")
SECRET_FIELDS = re.compile(r'("(?:refresh_token|password|pin_hash|secret|apikey|access_token)"\s*:\s*")([^"]*)(")')


def scrub(text: str) -> str:
    text = JWT_RE.sub(DUMMY_JWT, text)
    return SECRET_FIELDS.sub(lambda m: m.group(1) + (DUMMY_JWT if m.group(2) == DUMMY_JWT else "dummy-secret")
                             + m.group(3), text)


def scrub_bytes(b: bytes) -> bytes:
    return scrub(b.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")


# --------------------------------------------------------------------------- capture on lo

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


class Sniffer:
    """Every IPv4/IPv6 UDP and TCP packet on `lo`, once each (the outgoing copy is skipped)."""

    def __init__(self) -> None:
        self.udp: list[tuple[tuple, tuple, bytes]] = []           # (src, dst, payload)
        self.tcp: list[tuple[tuple, tuple, int, int, bytes]] = []  # (src, dst, seq, flags, payload)
        self._stop = False
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sock.bind(("lo", 0))
        self.sock.settimeout(0.2)
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stop = True
        self.thread.join()
        self.sock.close()

    def _run(self) -> None:
        while not self._stop:
            try:
                frame, addr = self.sock.recvfrom(262144)
            except socket.timeout:
                continue
            if addr[2] == PACKET_OUTGOING:
                continue
            self._packet(frame[14:])

    def _packet(self, ip: bytes) -> None:
        if not ip:
            return
        v = ip[0] >> 4
        if v == 4:
            ihl = (ip[0] & 15) * 4
            total = struct.unpack("!H", ip[2:4])[0]
            proto, src, dst, l4 = ip[9], socket.inet_ntop(socket.AF_INET, ip[12:16]), \
                socket.inet_ntop(socket.AF_INET, ip[16:20]), ip[ihl:total]
        elif v == 6:
            plen = struct.unpack("!H", ip[4:6])[0]
            proto, src, dst, l4 = ip[6], socket.inet_ntop(socket.AF_INET6, ip[8:24]), \
                socket.inet_ntop(socket.AF_INET6, ip[24:40]), ip[40:40 + plen]
        else:
            return
        if proto == 17 and len(l4) >= 8:
            sp, dp = struct.unpack("!HH", l4[:4])
            self.udp.append(((src, sp), (dst, dp), bytes(l4[8:])))
        elif proto == 6 and len(l4) >= 20:
            sp, dp, seq = struct.unpack("!HHI", l4[:8])
            off, flags = (l4[12] >> 4) * 4, l4[13]
            self.tcp.append(((src, sp), (dst, dp), seq, flags, bytes(l4[off:])))

    def streams(self) -> dict[tuple, bytes]:
        """TCP byte streams per direction, in sequence order (loopback: no loss, few reorders)."""
        segs: dict[tuple, dict[int, bytes]] = defaultdict(dict)
        for src, dst, seq, _flags, payload in self.tcp:
            if payload:
                segs[(src, dst)].setdefault(seq, payload)
        out = {}
        for key, by_seq in segs.items():
            first = min(by_seq)
            out[key] = b"".join(by_seq[s] for s in sorted(by_seq, key=lambda s: (s - first) % 2**32))
        return out


# --------------------------------------------------------------------------- HTTP / WebSocket


def http_answer(head: bytes, headers: dict, body: bytes) -> bytes:
    """An HTTP/1.1 answer again from its head and (changed) body, framed as the head says."""
    lines = [f"Content-Length: {len(body)}" if l.lower().startswith("content-length:") else l
             for l in head.decode("latin-1").split("\r\n")]
    out = "\r\n".join(lines).encode("latin-1")
    if headers.get("transfer-encoding", "").lower() == "chunked":
        return out + (f"{len(body):x}\r\n".encode() + body + b"\r\n" if body else b"") + b"0\r\n\r\n"
    return out + body


def split_http(stream: bytes, responses: bool) -> tuple[list[tuple[str, dict, bytes, bytes]], bytes]:
    """Messages (start line, headers, body, raw head) until an Upgrade; returns them and what follows."""
    msgs, i = [], 0
    while i < len(stream):
        end = stream.find(b"\r\n\r\n", i)
        if end < 0:
            break
        head = stream[i:end + 4]
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:] if l)}
        j = end + 4
        body = b""
        if headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                nl = stream.find(b"\r\n", j)
                if nl < 0:
                    break
                n = int(stream[j:nl].split(b";")[0] or b"0", 16)
                body += stream[nl + 2:nl + 2 + n]
                j = nl + 2 + n + 2
                if n == 0:
                    break
        else:
            n = int(headers.get("content-length", "0"))
            body, j = stream[j:j + n], j + n
        msgs.append((lines[0], headers, body, head))
        i = j
        if responses and lines[0].split(" ")[1:2] == ["101"]:
            return msgs, stream[i:]
        if not responses and headers.get("upgrade", "").lower() == "websocket":
            return msgs, stream[i:]
    return msgs, b""


def ws_frames(data: bytes) -> list[tuple[int, int, bytes]]:
    """(fin+opcode byte, was-masked, payload) of each complete frame, unmasked and, where
    permessage-deflate compressed it (RSV1, RFC 7692; aiohttp negotiates it), inflated."""
    out, i = [], 0
    inflate = zlib.decompressobj(-15)
    while i + 2 <= len(data):
        b0, b1 = data[i], data[i + 1]
        n, j = b1 & 0x7F, i + 2
        if n == 126:
            n, j = struct.unpack("!H", data[j:j + 2])[0], j + 2
        elif n == 127:
            n, j = struct.unpack("!Q", data[j:j + 8])[0], j + 8
        mask = data[j:j + 4] if b1 & 0x80 else None
        j += 4 if mask else 0
        if j + n > len(data):
            break
        p = data[j:j + n]
        if mask:
            p = bytes(c ^ mask[k % 4] for k, c in enumerate(p))
        if b0 & 0x40:
            p, b0 = inflate.decompress(p + b"\x00\x00\xff\xff"), b0 & ~0x40
        out.append((b0, 1 if mask else 0, p))
        i = j + n
    return out


def ws_encode(b0: int, payload: bytes, mask: bytes | None = None) -> bytes:
    n = len(payload)
    m = 0x80 if mask else 0
    if n < 126:
        head = bytes([b0, m | n])
    elif n < 65536:
        head = bytes([b0, m | 126]) + struct.pack("!H", n)
    else:
        head = bytes([b0, m | 127]) + struct.pack("!Q", n)
    if mask:
        return head + mask + bytes(c ^ mask[k % 4] for k, c in enumerate(payload))
    return head + payload


# --------------------------------------------------------------------------- the cast


async def cast(stack, seconds: float, clear_rtp: list[bytes], sdps: list[str], rows: list[dict]) -> None:
    from aiortc import rtcdtlstransport
    from castkit.devstack import random_ip
    from castkit.receiver_answerer import ReceiverAnswerer
    from castkit.ref_sender import RefSender
    from castkit.signaling import StackClient, StackConfig

    original = rtcdtlstransport.RTCDtlsTransport._send_rtp

    async def tap(self, data: bytes) -> None:
        if len(clear_rtp) < 4000:
            clear_rtp.append(bytes(data))
        await original(self, data)

    rtcdtlstransport.RTCDtlsTransport._send_rtp = tap
    try:
        config = StackConfig(stack.api_url, stack.supabase_url, stack.key)
        async with StackClient(config) as receiver, StackClient(config, forwarded_for=random_ip()) as sc:
            created = await receiver.api("session-create", {})
            sid, pin = created["sessionId"], created["pin"]
            qr = next((v for v in created.values() if isinstance(v, str) and "://" in v), None)
            rows.append({"pin": pin, "qr": qr})
            approval = {"sessionId": sid, "approve": True}
            rx = ReceiverAnswerer(receiver, sid)
            await rx.start()
            sender = RefSender(sc, width=320, height=180, fps=30, ice_servers=None)
            try:
                await sender.pair(pin=pin)
                await receiver.api("session-approve", approval)
                await sender.wait_approved(timeout=10)
                await sender.start()
                await rx.wait_frames(20, timeout=20)
                for pc in (sender.pc, rx.pc):  # the offer and the answer as each peer made them
                    if pc is not None and pc.localDescription is not None:
                        sdps.append(pc.localDescription.sdp)
                await rx.send_pli()
                await rx.send_fir()
                await asyncio.sleep(seconds)
                await sender.stop()
                await rx.signals.wait_row(lambda r: r["message_type"] == "disconnect", timeout=10)
                for r in await receiver.select(sid, "receiver") + await receiver.select(sid, "sender"):
                    rows.append(r)
                    sdp = (r.get("payload") or {}).get("sdp")
                    if sdp:
                        sdps.append(sdp)
            finally:
                await sender.close()
                await rx.close()
    finally:
        rtcdtlstransport.RTCDtlsTransport._send_rtp = original


# --------------------------------------------------------------------------- H.264


def access_units(width: int, height: int, frames: int, extra: list[str]) -> list[bytes]:
    """Annex-B access units from ffmpeg's libx264, split at the access unit delimiters."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "o.h264"
        subprocess.run(["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i",
                        f"testsrc2=size={width}x{height}:rate=30", "-frames:v", str(frames),
                        "-c:v", "libx264", *extra, "-bsf:v", "h264_metadata=aud=insert",
                        "-f", "h264", str(out)], check=True)
        data = out.read_bytes()
    aud = b"\x00\x00\x00\x01\x09"
    starts = [m.start() for m in re.finditer(re.escape(aud), data)]
    return [data[a:b] for a, b in zip(starts, starts[1:] + [len(data)])]


# --------------------------------------------------------------------------- seeds


class Seeds:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.by_target: dict[str, list[bytes]] = defaultdict(list)

    def add(self, target: str, data: bytes) -> None:
        if 0 < len(data) <= MAX_BYTES and data not in self.by_target[target]:
            self.by_target[target].append(data)

    def write(self) -> dict[str, int]:
        counts = {}
        rnd = random.Random(8)
        for target, items in sorted(self.by_target.items()):
            if len(items) > MAX_FILES:  # keep a spread: the first few, then an even sample
                items = items[:8] + rnd.sample(items[8:], MAX_FILES - 8)
            d = self.out / target
            d.mkdir(parents=True, exist_ok=True)
            for old in d.iterdir():  # regression-<sha1>: inputs of fixed crashes, kept
                if not old.name.startswith("regression-"):
                    old.unlink()
            for item in items:
                (d / hashlib.sha1(item).hexdigest()).write_bytes(item)
            counts[target] = len(items)
        return counts


def kind(b: bytes) -> str:
    """RFC 7983 demultiplexing by the first byte, RTCP by payload type 192–223."""
    if not b:
        return "?"
    if b[0] <= 3:
        return "stun"
    if 20 <= b[0] <= 63:
        return "dtls"
    if 128 <= b[0] <= 191 and len(b) > 1:
        return "rtcp" if 192 <= b[1] <= 223 else "rtp"
    return "?"


def stun_attributes(m: bytes) -> bytes:
    """The attributes of a STUN message without MESSAGE-INTEGRITY(-SHA256) and FINGERPRINT."""
    out, i = b"", 20
    while i + 4 <= len(m):
        t, n = struct.unpack("!HH", m[i:i + 4])
        whole = m[i:i + 4 + n + (-n % 4)]
        if t not in (0x0008, 0x001C, 0x8028):
            out += whole
        i += 4 + n + (-n % 4)
    return out


def build(seeds: Seeds, sniff: Sniffer, stack, clear_rtp: list[bytes], sdps: list[str], rows: list[dict]) -> None:
    """Every target's seeds from one capture, group by group."""
    udp_seeds(seeds, sniff)
    clear_rtp_seeds(seeds, clear_rtp)
    h264_seeds(seeds)
    sdp_seeds(seeds, sdps, rows)
    gateway_seeds(seeds, sniff, int(stack.api_url.rsplit(":", 1)[1].split("/")[0]))
    pairing_seeds(seeds, rows)
    mdns_seeds(seeds, sniff)


def udp_seeds(seeds: Seeds, sniff: Sniffer) -> None:
    """STUN, the ICE agent's records, DTLS flights and SRTP/SRTCP from the captured datagrams."""
    flows: dict[tuple, list[bytes]] = defaultdict(list)
    for src, dst, p in sniff.udp:
        flows[(src, dst)].append(p)
    stun_all = [p for _s, _d, p in sniff.udp if kind(p) == "stun"]
    for p in stun_all:
        seeds.add("STUN", p)
    # ICE agent: raw datagrams (op bit 7) from the first source, interleaved with time
    # steps; and the same attributes wrapped with valid integrity (op bit 2) per class.
    small = [p for p in stun_all if len(p) <= 255]
    for k in range(0, min(len(small), 60), 6):
        rec = b""
        for p in small[k:k + 6]:
            rec += bytes([0x80, len(p)]) + p + bytes([0x40, 1, 5])
        seeds.add("STUNICEAgent", rec)
    for p in small[:40]:
        attrs = stun_attributes(p)
        cls = ((p[0] & 1) << 1) | ((p[1] >> 4) & 1)  # request, indication, success, error
        if len(attrs) <= 255:
            seeds.add("STUNICEAgent", bytes([(cls << 4) | 0x04 | (0x08 if cls >= 2 else 0), len(attrs)]) + attrs)
    # DTLS: each direction's datagrams as [u16 len][bytes] records; mode 0 (our ClientHello
    # already answered) and mode 1 (fresh server), with and without timer steps.
    for (src, dst), ps in flows.items():
        dtls = [p for p in ps if kind(p) == "dtls"]
        if not dtls:
            continue
        recs = b"".join(struct.pack("!H", len(p)) + p for p in dtls)
        seeds.add("DTLS", b"\x01" + recs)
        seeds.add("DTLS", b"\x00" + b"".join(struct.pack("!H", len(p)) + p for p in dtls[1:]))
        seeds.add("DTLS", b"\x00" + recs + b"\x00\x00" + recs)
        for p in dtls:
            seeds.add("DTLS", b"\x00" + struct.pack("!H", len(p)) + p)
    # SRTP/SRTCP as captured (both profiles' modes; the bytes are aiortc's AES-CM-80).
    srtp = [p for p in (p for _s, _d, p in sniff.udp) if kind(p) in ("rtp", "rtcp")]
    for p in srtp[:30] + srtp[-30:]:
        bit = 2 if kind(p) == "rtcp" else 0
        seeds.add("DTLSSRTP", bytes([bit]) + p)
        seeds.add("DTLSSRTP", bytes([bit | 1]) + p)


def clear_rtp_seeds(seeds: Seeds, clear_rtp: list[bytes]) -> None:
    """aiortc's RTP and RTCP taken in the clear before SRTP."""
    rtp = [p for p in clear_rtp if kind(p) == "rtp"]
    rtcp = [p for p in clear_rtp if kind(p) == "rtcp"]
    for p in rtp[:20] + [p for p in rtp if p[1] & 0x80][:20]:  # first packets and marker packets
        seeds.add("RTP", p)
    for p in rtcp:
        seeds.add("RTPRTCP", p)


def h264_seeds(seeds: Seeds) -> None:
    """Access units of ffmpeg's libx264 in four profiles, each behind a budget byte."""
    aus = []
    for extra in (["-profile:v", "baseline", "-tune", "zerolatency", "-g", "10"],
                  ["-profile:v", "main", "-tune", "zerolatency", "-g", "10"],
                  ["-profile:v", "high", "-preset", "veryfast", "-g", "10"],
                  ["-profile:v", "baseline", "-x264-params", "slices=4", "-g", "10"]):
        aus += access_units(320, 180, 12, extra)[:10]
    budgets = [0, 60, 61, 63, 17, 33, 5, 40]
    for n, au in enumerate(aus):
        seeds.add("RTPH264", bytes([budgets[n % len(budgets)]]) + au)


def sdp_seeds(seeds: Seeds, sdps: list[str], rows: list[dict]) -> None:
    """The SDPs of the cast and the Chromium fixtures; their candidates and fingerprints."""
    fixtures = sorted((REPO / "Tests" / "CastWebRTCTests" / "Fixtures").glob("*.sdp"))
    texts = sdps + [f.read_text() for f in fixtures]
    for t in texts:
        seeds.add("SDP", t.encode())
        for line in re.split(r"\r?\n", t):
            if line.startswith("a=candidate:"):
                seeds.add("SDPCandidate", line.encode())
                seeds.add("SDPCandidate", line[2:].encode())
            if line.startswith("a=fingerprint:"):
                seeds.add("DTLSFingerprint", line[len("a=fingerprint:"):].encode())
    for r in rows:
        c = (r.get("payload") or {}).get("candidate") if isinstance(r.get("payload"), dict) else None
        if isinstance(c, str) and c:
            seeds.add("SDPCandidate", c.encode())


def gateway_seeds(seeds: Seeds, sniff: Sniffer, gw_port: int) -> None:
    """Every TCP stream from the gateway: HTTP answers, then the WebSocket that follows an upgrade."""
    streams = sniff.streams()
    for (src, dst), data in streams.items():
        if src[1] != gw_port:
            continue
        reqs, _ = split_http(streams.get((dst, src), b""), responses=False)
        resps, rest = split_http(data, responses=True)
        http_seeds(seeds, reqs, resps)
        if rest:
            websocket_seeds(seeds, rest)


def http_seeds(seeds: Seeds, reqs: list, resps: list) -> None:
    """The gateway's HTTP answers: the client's parser (SignalingHTTP) and the JSON bodies by path."""
    for n, (start, headers, body, head) in enumerate(resps):
        status = int(start.split(" ")[1])
        path = reqs[n][0].split(" ")[1] if n < len(reqs) else ""
        body = scrub_bytes(body)
        if status == 101:
            seeds.add("SignalingWebSocket", b"\x00" + head)
            continue
        # The development HTTP client's parser: the whole answer as the gateway framed it
        # (scrubbed, so Content-Length / the chunk size follow the new body), read as GET in
        # 1- and 8-byte pieces, and its head alone as the answer to a HEAD.
        raw = http_answer(scrub_bytes(head), headers, body)
        for mode in (0x00, 0x0E):
            seeds.add("SignalingHTTP", bytes([mode]) + raw)
        seeds.add("SignalingHTTP", b"\x01" + scrub_bytes(head))
        if "json" not in headers.get("content-type", ""):
            continue
        if path.startswith("/auth/"):
            seeds.add("SignalingJSON", (b"\x04" if status < 300 else b"\x03") + body)
        elif path.startswith("/rest/"):
            if status >= 300:
                seeds.add("SignalingJSON", b"\x02" + body)
            else:
                try:
                    items = json.loads(body)
                except ValueError:
                    items = []
                for it in items if isinstance(items, list) else [items]:
                    seeds.add("SignalingJSON", b"\x00" + json.dumps(it).encode())
        else:
            seeds.add("SignalingJSON", (b"\x05" if status < 300 else b"\x01") + body)


def websocket_seeds(seeds: Seeds, rest: bytes) -> None:
    """The gateway's Realtime WebSocket after the upgrade: frames, Phoenix messages, their JSON."""
    frames = ws_frames(rest)
    texts = [scrub_bytes(p) for b0, _m, p in frames if b0 & 0x0F == 1]
    # The Python client speaks Phoenix's object form; castd asks for the array form
    # (vsn 2.0.0) on topic realtime:castd-<session>, as the harness subscribes (s1).
    arrays = []
    for t in texts:
        try:
            m = json.loads(t)
        except ValueError:
            continue
        if isinstance(m, dict):
            m = [m.get("join_ref"), m.get("ref"), m.get("topic"), m.get("event"), m.get("payload")]
        if not (isinstance(m, list) and len(m) == 5):
            continue
        if isinstance(m[2], str) and m[2].startswith("realtime:"):
            m[0], m[2] = m[0] and "1", "realtime:castd-s1"
        arrays.append(json.dumps(m, separators=(",", ":")).encode())
        if isinstance(m[4], dict):
            seeds.add("SignalingJSON", b"\x09" + json.dumps(m[4]).encode())
            rec = (m[4].get("data") or {}).get("record")
            if isinstance(rec, dict):
                seeds.add("SignalingJSON", b"\x00" + json.dumps(rec).encode())
    for t in arrays:
        seeds.add("SignalingPhoenix", t)
    for k in range(0, len(arrays), 8):  # a conversation: several frames, one per line
        seeds.add("SignalingPhoenix", b"\n".join(arrays[k:k + 8]))
    if texts:
        seeds.add("SignalingPhoenix", texts[0])  # one in the object form castd does not ask for
    reframed = [ws_encode(b0, scrub_bytes(p) if b0 & 0x0F == 1 else p) for b0, _m, p in frames]
    for k in range(0, len(reframed), 6):
        chunk = b"".join(reframed[k:k + 6])
        seeds.add("SignalingWebSocket", b"\x01" + chunk)
        seeds.add("SignalingWebSocket", b"\x02" + chunk)
    # a fragmented text message and a close, both as the server would send them
    if texts:
        t = texts[0]
        half = len(t) // 2
        seeds.add("SignalingWebSocket", b"\x02" + ws_encode(0x01, t[:half]) + ws_encode(0x80, t[half:])
                  + ws_encode(0x88, struct.pack("!H", 1000) + b"bye"))


def pairing_seeds(seeds: Seeds, rows: list[dict]) -> None:
    """PINs, QR tokens and timestamps of the signaling rows; the dummy JWT."""
    for r in rows:
        if r.get("pin"):
            seeds.add("SignalingJSON", b"\x07" + str(r["pin"]).encode())
            seeds.add("SignalingJSON", b"\x07" + (str(r["pin"])[:3] + " " + str(r["pin"])[3:]).encode())
        if r.get("qr"):
            seeds.add("SignalingJSON", b"\x06" + r["qr"].encode())
        if r.get("created_at"):
            seeds.add("SignalingJSON", b"\x09" + str(r["created_at"]).encode())
    seeds.add("SignalingJSON", b"\x08" + DUMMY_JWT.encode())


def mdns_seeds(seeds: Seeds, sniff: Sniffer) -> None:
    """castkit/mdns_responder's answers (Chromium-like announcements) and what was captured on 5353."""
    from castkit import mdns_responder as mr
    names = ["87c85f0a-3708-455f-894d-a0a402bf58a9.local", "4f0c3f5e-1b2a-4c3d-9e8f-0a1b2c3d4e5f.local"]
    for name in names:
        for ip, ttl in (("10.99.0.1", 120), ("192.0.2.2", 0), ("127.0.0.1", 4500)):
            seeds.add("MDNS", mr.response(name, ip, ttl))
    for _s, d, p in sniff.udp:
        if d[1] == 5353:
            seeds.add("MDNS", p)


async def mdns_traffic() -> None:
    """Let the responder answer a real query, so its bytes on the wire are captured too."""
    from castkit import mdns_responder as mr
    r = mr.MDNSResponder("127.0.0.1", answer=True, announce=True)
    try:
        await r.start()
    except OSError:
        return
    r.register("87c85f0a-3708-455f-894d-a0a402bf58a9.local", "10.99.0.1")
    q = struct.pack("!HHHHHH", 0, 0, 1, 0, 0, 0) + mr.encode_name("87c85f0a-3708-455f-894d-a0a402bf58a9.local") \
        + struct.pack("!HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    s.sendto(q, (mr.GROUP, mr.PORT))
    await asyncio.sleep(0.5)
    s.close()
    r.close()


def candidate_ports(sdps: list[str], rows: list[dict]) -> set[int]:
    """The UDP ports of every ICE candidate the two peers offered (SDP lines and trickled rows)."""
    lines = [l for t in sdps for l in re.split(r"\r?\n", t) if l.startswith("a=candidate:")]
    lines += [r["payload"]["candidate"] for r in rows
              if isinstance(r.get("payload"), dict) and isinstance(r["payload"].get("candidate"), str)]
    return {int(f[5]) for f in (l.split() for l in lines) if len(f) > 5 and f[5].isdigit()}


def generate(stack, out: Path, seconds: float) -> tuple[dict[str, int], str]:
    """Capture a cast through `stack` and write the seeds to out/<Target>/; (counts, summary)."""
    sniff = Sniffer()
    sniff.start()
    clear_rtp: list[bytes] = []
    sdps: list[str] = []
    rows: list[dict] = []
    try:
        asyncio.run(cast(stack, seconds, clear_rtp, sdps, rows))
        asyncio.run(mdns_traffic())
        time.sleep(0.5)
    finally:
        sniff.stop()
    # Only this cast's flows: other programs on the machine may use loopback too.
    ports = candidate_ports(sdps, rows) | {stack.stun_port}
    sniff.udp = [u for u in sniff.udp if u[0][1] in ports or u[1][1] in ports or u[1][1] == 5353]
    seeds = Seeds(out)
    build(seeds, sniff, stack, clear_rtp, sdps, rows)
    counts = seeds.write()
    return counts, (f"captured {len(sniff.udp)} UDP packets of the cast, {len(sniff.tcp)} TCP segments, "
                    f"{len(clear_rtp)} clear RTP/RTCP packets, {len(sdps)} SDPs")


def leaked_tokens(out: Path) -> list[Path]:
    """Seed files holding a JWT-shaped string other than the dummy."""
    return [p for p in out.rglob("*") if p.is_file()
            and any(m != DUMMY_JWT for m in JWT_RE.findall(p.read_bytes().decode("latin-1")))]
