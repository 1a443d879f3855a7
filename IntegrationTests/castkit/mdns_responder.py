"""A small multicast DNS responder (RFC 6762) for tests: it owns a few `<uuid>.local`
names and, like a browser hiding its host addresses, can announce them (unsolicited
responses, §8.3, as Chromium does), answer queries for them (multicast responses), or
stay silent. It counts the queries it hears for its names.

    r = MDNSResponder("127.0.0.1", answer=True, announce=False)
    await r.start()
    r.register("4f0c…-….local", "10.99.0.1")
"""
from __future__ import annotations

import asyncio
import socket
import struct

GROUP = "224.0.0.251"
PORT = 5353


def read_name(data: bytes, i: int) -> tuple[str, int]:
    """A possibly compressed name (RFC 1035 §4.1.4) at i; returns it and the offset after it."""
    labels, end, hops = [], None, 0
    while True:
        n = data[i]
        if n & 0xC0 == 0xC0:
            if end is None:
                end = i + 2
            i = ((n & 0x3F) << 8) | data[i + 1]
            hops += 1
            if hops > 16:
                raise ValueError("name pointer loop")
            continue
        if n == 0:
            return ".".join(labels), (end if end is not None else i + 1)
        labels.append(data[i + 1:i + 1 + n].decode())
        i += 1 + n


def questions(data: bytes) -> list[tuple[str, int]]:
    """(name, type) of each question of a query; [] for a response or a malformed message."""
    try:
        _id, flags, qd = struct.unpack("!HHH", data[:6])
        if flags & 0x8000:
            return []
        out, i = [], 12
        for _ in range(qd):
            name, i = read_name(data, i)
            qtype, _qclass = struct.unpack("!HH", data[i:i + 4])
            i += 4
            out.append((name, qtype))
        return out
    except (ValueError, IndexError, struct.error, UnicodeDecodeError):
        return []


def encode_name(name: str) -> bytes:
    return b"".join(bytes([len(l)]) + l.encode() for l in name.rstrip(".").split(".")) + b"\0"


def response(name: str, ip: str, ttl: int = 120) -> bytes:
    """One A record with the cache-flush bit (what Chromium announces)."""
    header = struct.pack("!HHHHHH", 0, 0x8400, 0, 1, 0, 0)
    rr = encode_name(name) + struct.pack("!HHIH", 1, 0x8001, ttl, 4) + socket.inet_aton(ip)
    return header + rr


def group_users(device: str | None = None) -> dict[str, int]:
    """How many sockets of this network namespace are joined to the mDNS groups on `device`
    (None: summed over every interface but lo), per the kernel (the Users column of
    /proc/net/igmp and /proc/net/igmp6): {"v4": n, "v6": n}."""
    def counted(name: str) -> bool:
        return name == device if device else name != "lo"
    users = {"v4": 0, "v6": 0}
    current = None
    with open("/proc/net/igmp") as f:
        for line in f.read().splitlines()[1:]:
            fields = line.split()
            if not line[:1].isspace() and len(fields) > 1:
                current = fields[1].rstrip(":")   # a 10-character name runs into the colon
            elif current and counted(current) and fields and fields[0] == "FB0000E0":   # 224.0.0.251, host order
                users["v4"] += int(fields[1])
    with open("/proc/net/igmp6") as f:
        for line in f.read().splitlines():
            fields = line.split()
            if len(fields) > 3 and counted(fields[1]) and fields[2] == "ff0200000000000000000000000000fb":
                users["v6"] += int(fields[3])
    return users


class MDNSResponder(asyncio.DatagramProtocol):
    def __init__(self, interface_ip: str = "127.0.0.1", *, answer: bool = True, announce: bool = False):
        self.interface_ip = interface_ip
        self.answer = answer
        self.announce = announce
        self.names: dict[str, str] = {}
        self.queries_heard: dict[str, int] = {}
        self.responses_sent = 0
        self.transport: asyncio.DatagramTransport | None = None

    async def start(self) -> "MDNSResponder":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        s.bind(("0.0.0.0", PORT))
        iface = socket.inet_aton(self.interface_ip)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton(GROUP) + iface)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, iface)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 255)
        s.setblocking(False)
        loop = asyncio.get_running_loop()
        self.transport, _ = await loop.create_datagram_endpoint(lambda: self, sock=s)
        return self

    def register(self, name: str, ip: str) -> None:
        self.names[name.lower()] = ip
        if self.announce:
            # §8.3: at least two announcements, one second apart.
            self._send(response(name, ip))
            asyncio.get_running_loop().call_later(1.0, self._send, response(name, ip))

    def _send(self, data: bytes) -> None:
        if self.transport is not None:
            self.transport.sendto(data, (GROUP, PORT))
            self.responses_sent += 1

    def datagram_received(self, data: bytes, addr) -> None:
        for name, qtype in questions(data):
            key = name.lower()
            if key not in self.names:
                continue
            self.queries_heard[key] = self.queries_heard.get(key, 0) + 1
            if self.answer and qtype == 1:
                self._send(response(name, self.names[key]))

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
