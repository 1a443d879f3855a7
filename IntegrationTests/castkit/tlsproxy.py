"""A TLS-terminating TCP proxy for tests: it accepts TLS with a certificate made by `openssl req
-x509` and forwards the plaintext to an upstream TCP port (the local stack's gateway), so castd can
be pointed at https:// and wss:// URLs backed by the real stack.

It counts what happened: TLS handshakes completed and failed, upstream connections opened and the
bytes forwarded each way. A refused client leaves `upstream_connections == 0` and
`bytes_up == 0`: nothing reached the gateway.

    cert = make_certificate(tmp, "IP:127.0.0.1")           # self-signed, for that subjectAltName
    async with TLSProxy("127.0.0.1", gateway_port, cert) as p:
        p.url                                               # https://127.0.0.1:<port>
"""
from __future__ import annotations

import asyncio
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Certificate:
    cert: Path
    key: Path


def make_certificate(directory: Path, subject_alt_name: str, name: str = "server") -> Certificate:
    """A self-signed P-256 certificate (valid 2 days) for subject_alt_name ("IP:…" or "DNS:…")."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", f"/CN={name}",
                    "-addext", f"subjectAltName={subject_alt_name}"], check=True, capture_output=True)
    key.chmod(0o600)
    return Certificate(cert, key)


class TLSProxy:
    def __init__(self, upstream_host: str, upstream_port: int, certificate: Certificate,
                 listen_host: str = "127.0.0.1"):
        self.upstream = (upstream_host, upstream_port)
        self.listen_host = listen_host
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        self.ctx.load_cert_chain(str(certificate.cert), str(certificate.key))
        self.handshakes_ok = 0
        self.handshakes_failed = 0
        self.upstream_connections = 0
        self.bytes_up = 0          # client → gateway (plaintext)
        self.bytes_down = 0        # gateway → client
        self.server: asyncio.AbstractServer | None = None
        self.port = 0
        self._tasks: set[asyncio.Task] = set()

    @property
    def url(self) -> str:
        return f"https://{self.listen_host}:{self.port}"

    async def __aenter__(self) -> "TLSProxy":
        # The handshake is done by hand (not start_server(ssl=…)) so that failures are counted.
        self.server = await asyncio.start_server(self._accept, self.listen_host, 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc) -> None:
        self.server.close()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        t = asyncio.current_task()
        self._tasks.add(t)
        try:
            try:
                await asyncio.wait_for(writer.start_tls(self.ctx), 10)
            except (ssl.SSLError, ConnectionError, asyncio.TimeoutError, OSError):
                self.handshakes_failed += 1
                writer.transport.abort()
                return
            self.handshakes_ok += 1
            try:
                up_r, up_w = await asyncio.open_connection(*self.upstream)
            except OSError:
                writer.close()
                return
            self.upstream_connections += 1
            await asyncio.gather(self._pump(reader, up_w, "bytes_up"), self._pump(up_r, writer, "bytes_down"),
                                 return_exceptions=True)
        finally:
            self._tasks.discard(t)

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, counter: str) -> None:
        try:
            while data := await src.read(65536):
                setattr(self, counter, getattr(self, counter) + len(data))
                dst.write(data)
                await dst.drain()
        except (ConnectionError, ssl.SSLError, OSError):
            pass
        finally:
            try:
                dst.close()
            except Exception:
                pass
