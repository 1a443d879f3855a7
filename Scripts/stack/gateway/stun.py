"""A STUN Binding responder (RFC 5389) on UDP 127.0.0.1:<stun-port>, so that
castd's ICE finds a server-reflexive path without leaving the machine.

The codec is pure (bytes in, bytes out); `StunProtocol` is the thin asyncio
shell. Only Binding requests get an answer; anything else is dropped
silently (RFC 5389 §7.3: a server discards what it cannot parse)."""
from __future__ import annotations

import asyncio
import ipaddress
import struct
import zlib

MAGIC_COOKIE = 0x2112A442  # RFC 5389 §6
BINDING_REQUEST = 0x0001
BINDING_SUCCESS = 0x0101
ATTR_XOR_MAPPED_ADDRESS = 0x0020  # RFC 5389 §15.2
ATTR_SOFTWARE = 0x8022  # §15.10
ATTR_FINGERPRINT = 0x8028  # §15.5
FINGERPRINT_XOR = 0x5354554E
SOFTWARE = b"castd devstack"

#  0                   1                   2                   3
#  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
# +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
# |0 0|     STUN Message Type     |         Message Length        |
# +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
# |                         Magic Cookie                          |
# +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
# |                     Transaction ID (96 bits)                  |
# +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+   (RFC 5389 §6)


def parse_binding_request(data: bytes) -> bytes | None:
    """The transaction id of a well-formed Binding request, else None."""
    if len(data) < 20 or len(data) % 4:
        return None
    mtype, length, cookie = struct.unpack_from("!HHI", data, 0)
    if mtype & 0xC000 or cookie != MAGIC_COOKIE or length != len(data) - 20 or mtype != BINDING_REQUEST:
        return None
    # Attributes must be well-formed TLVs padded to 4 bytes (§15).
    off = 20
    while off < len(data):
        if off + 4 > len(data):
            return None
        _, alen = struct.unpack_from("!HH", data, off)
        off += 4 + alen + (-alen % 4)
        if off > len(data):
            return None
    return data[8:20]


def xor_mapped_address(ip: str, port: int, txid: bytes) -> bytes:
    """XOR-MAPPED-ADDRESS value (RFC 5389 §15.2): family, X-Port, X-Address."""
    addr = ipaddress.ip_address(ip)
    xport = port ^ (MAGIC_COOKIE >> 16)
    if addr.version == 4:
        xaddr = int(addr) ^ MAGIC_COOKIE
        return struct.pack("!BBHI", 0, 0x01, xport, xaddr)
    key = int.from_bytes(struct.pack("!I", MAGIC_COOKIE) + txid, "big")
    return struct.pack("!BBH", 0, 0x02, xport) + (int(addr) ^ key).to_bytes(16, "big")


def attribute(atype: int, value: bytes) -> bytes:
    return struct.pack("!HH", atype, len(value)) + value + b"\x00" * (-len(value) % 4)


def binding_success(txid: bytes, ip: str, port: int, software: bytes | None = SOFTWARE) -> bytes:
    """A Binding success response with XOR-MAPPED-ADDRESS, optionally
    SOFTWARE, and FINGERPRINT (RFC 5389 §15.5: CRC-32 of the message up to the
    attribute, with the length already counting it, XOR 0x5354554e)."""
    body = attribute(ATTR_XOR_MAPPED_ADDRESS, xor_mapped_address(ip, port, txid))
    if software:
        body += attribute(ATTR_SOFTWARE, software)
    length = len(body) + 8  # + FINGERPRINT
    head = struct.pack("!HHI", BINDING_SUCCESS, length, MAGIC_COOKIE) + txid
    crc = (zlib.crc32(head + body) & 0xFFFFFFFF) ^ FINGERPRINT_XOR
    return head + body + attribute(ATTR_FINGERPRINT, struct.pack("!I", crc))


class StunProtocol(asyncio.DatagramProtocol):
    def connection_made(self, transport):
        self.transport = transport

    def datagram_received(self, data: bytes, addr) -> None:
        txid = parse_binding_request(data)
        if txid is not None:
            self.transport.sendto(binding_success(txid, addr[0], addr[1]), addr)


async def start(host: str, port: int):
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(StunProtocol, local_addr=(host, port))
    return transport
