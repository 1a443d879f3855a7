"""The TCP forwarder of faults/chromium_proc.py (the receiver pages reach the stack through it
from the receiver namespace): bytes carried whole both ways, an end closed on either side
closes the other, and a refused upstream closes the client instead of leaving it hanging.
On loopback in this namespace; the Chromium rows of Scripts/faults use it for real."""
import asyncio
import os
import socket

from castkit.chromium_proc import forward


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_bytes_go_both_ways_whole_and_an_upstream_close_reaches_the_client():
    seen = asyncio.get_running_loop().create_future()

    async def upstream(r: asyncio.StreamReader, w: asyncio.StreamWriter):
        data = await r.readexactly(300_000)
        w.write(data[::-1])                 # something the client can check, not an echo of its buffer
        await w.drain()
        w.close()                           # the upstream ends the connection first
        seen.set_result(len(data))

    up = await asyncio.start_server(upstream, "127.0.0.1", 0)
    port = free_port()
    servers = await forward(port, "127.0.0.1", up.sockets[0].getsockname()[1])
    try:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        payload = os.urandom(300_000)
        w.write(payload)
        await w.drain()
        back = await asyncio.wait_for(r.read(), 10)     # read() to EOF: the close came through
        assert back == payload[::-1]
        assert await seen == 300_000
        w.close()
    finally:
        for s in servers + [up]:
            s.close()


async def test_a_client_close_reaches_the_upstream():
    closed = asyncio.get_running_loop().create_future()

    async def upstream(r: asyncio.StreamReader, w: asyncio.StreamWriter):
        first = await r.readexactly(5)
        rest = await r.read()               # EOF once the client went away
        closed.set_result(first + rest)

    up = await asyncio.start_server(upstream, "127.0.0.1", 0)
    port = free_port()
    servers = await forward(port, "127.0.0.1", up.sockets[0].getsockname()[1])
    try:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"hello, stack")
        await w.drain()
        w.close()
        assert await asyncio.wait_for(closed, 10) == b"hello, stack"
    finally:
        for s in servers + [up]:
            s.close()


async def test_a_refused_upstream_closes_the_client():
    port = free_port()
    servers = await forward(port, "127.0.0.1", free_port())     # nothing listens there
    try:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        assert await asyncio.wait_for(r.read(), 10) == b""
        w.close()
    finally:
        for s in servers:
            s.close()
