"""A world where only a TURN relay can carry a cast (root only; every address lives in
namespaces made here, nothing leaves the machine).

    castd ns (10.1.0.2) ── natc ──┐                     ┌── natr ── receiver ns (10.2.0.2)
                     masquerade   │  pub: coturn on     │   masquerade
                     fully-random └─ 198.51.100.1 ──────┘   fully-random

Each private side reaches the public namespace through its own symmetric NAT (nftables
masquerade with fully-random ports: a new mapping per destination, and no inbound without
one). The public namespace has no route to either private side, so no direct path exists:
castd's host and server-reflexive candidates cannot work, only a relayed one.

coturn runs with `use-auth-secret` (TURN REST credentials, as the stack's ice-config
hands them out: Scripts/stack/gateway/ice.py).
"""
from __future__ import annotations

import asyncio
import os
import pathlib
import secrets
import shutil
import subprocess
import time

from castkit.devsender import DevSender, answer_with_aiortc, castd_binary
from castkit.netns import Netns
from gateway.ice import turn_credentials

TURN_IP = "198.51.100.1"
TURN_PORT = 3478
TURNS_PORT = 5349
REALM = "castd.test"
TURN_URL = f"turn:{TURN_IP}:{TURN_PORT}"


def sh(*args: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=check, capture_output=True, text=True, **kw)


class TurnWorld:
    def __init__(self, lifetime: int | None = None, stale_nonce: int | None = None, tls: bool = False):
        tag = secrets.token_hex(2)
        self.ns = {k: f"castd-turn-{k}-{tag}" for k in ("c", "natc", "pub", "natr", "r")}
        self.tag = tag
        self.secret = secrets.token_hex(12)
        self.lifetime = lifetime
        self.stale_nonce = stale_nonce
        self.coturn: subprocess.Popen | None = None
        self.log_path = pathlib.Path(f"/tmp/castd-turn-{tag}.log")
        # TLS (turns:, RFC 8656 §3.1): a test CA made here, handed to castd with
        # --dev-trust-certificate; coturn's certificate names TURN_IP.
        self.tls = tls
        self.pki = pathlib.Path(f"/tmp/castd-turn-pki-{tag}")
        self.ca_path = self.pki / "ca.pem"

    # ------------------------------------------------------------------ plumbing

    def ip(self, ns: str, *args: str) -> None:
        sh("ip", "-n", self.ns[ns], *args)

    def exec(self, ns: str, *args: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns[ns], *args]

    def _veth(self, a: str, dev_a: str, addr_a: str, b: str, dev_b: str, addr_b: str) -> None:
        sh("ip", "link", "add", dev_a, "netns", self.ns[a], "type", "veth", "peer", "name", dev_b, "netns", self.ns[b])
        self.ip(a, "addr", "add", addr_a, "dev", dev_a)
        self.ip(b, "addr", "add", addr_b, "dev", dev_b)
        self.ip(a, "link", "set", dev_a, "up")
        self.ip(b, "link", "set", dev_b, "up")

    def _nat(self, ns: str, public_dev: str) -> None:
        sh("ip", "netns", "exec", self.ns[ns], "sysctl", "-qw", "net.ipv4.ip_forward=1")
        rules = (f"table ip nat {{\n"
                 f"  chain post {{ type nat hook postrouting priority srcnat; "
                 f'oifname "{public_dev}" masquerade fully-random; }}\n'
                 f"}}\n")
        subprocess.run(self.exec(ns, "nft", "-f", "-"), input=rules, text=True, check=True)

    def __enter__(self) -> "TurnWorld":
        try:
            for n in self.ns.values():
                sh("ip", "netns", "add", n)
                sh("ip", "-n", n, "link", "set", "lo", "up")
            t = self.tag
            self._veth("c", f"c{t}", "10.1.0.2/24", "natc", f"nci{t}", "10.1.0.1/24")
            self._veth("natc", f"nco{t}", "203.0.113.2/30", "pub", f"pc{t}", "203.0.113.1/30")
            self._veth("r", f"r{t}", "10.2.0.2/24", "natr", f"nri{t}", "10.2.0.1/24")
            self._veth("natr", f"nro{t}", "203.0.113.6/30", "pub", f"pr{t}", "203.0.113.5/30")
            self.ip("c", "route", "add", "default", "via", "10.1.0.1")
            self.ip("r", "route", "add", "default", "via", "10.2.0.1")
            self.ip("natc", "route", "add", "default", "via", "203.0.113.1")
            self.ip("natr", "route", "add", "default", "via", "203.0.113.5")
            self._nat("natc", f"nco{t}")
            self._nat("natr", f"nro{t}")
            # coturn's address on the public namespace's loopback (no dummy module needed).
            self.ip("pub", "addr", "add", f"{TURN_IP}/32", "dev", "lo")
            self.start_coturn()
        except BaseException:
            self.__exit__()
            raise
        return self

    def make_pki(self) -> None:
        """A CA and a server certificate for TURN_IP (IP SAN), with the openssl command."""
        self.pki.mkdir(mode=0o700, exist_ok=True)
        d = self.pki
        sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
           "-keyout", str(d / "ca.key"), "-out", str(self.ca_path), "-days", "2", "-subj", "/CN=castd test TURN CA")
        sh("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
           "-keyout", str(d / "server.key"), "-out", str(d / "server.csr"), "-subj", f"/CN={TURN_IP}")
        (d / "ext.cnf").write_text(f"subjectAltName=IP:{TURN_IP}\nextendedKeyUsage=serverAuth\n")
        sh("openssl", "x509", "-req", "-in", str(d / "server.csr"), "-CA", str(self.ca_path), "-CAkey", str(d / "ca.key"),
           "-CAcreateserial", "-out", str(d / "server.pem"), "-days", "2", "-extfile", str(d / "ext.cnf"))

    def start_coturn(self) -> None:
        tls = ["--no-tls"]
        if self.tls:
            if not self.ca_path.exists():
                self.make_pki()
            tls = ["--tls-listening-port", str(TURNS_PORT), "--cert", str(self.pki / "server.pem"),
                   "--pkey", str(self.pki / "server.key")]
        args = ["turnserver", "-n", "--listening-ip", TURN_IP, "--relay-ip", TURN_IP,
                "--listening-port", str(TURN_PORT), "--realm", REALM,
                "--use-auth-secret", "--static-auth-secret", self.secret,
                *tls, "--no-dtls", "--no-cli", "--no-software-attribute",
                "--min-port", "49152", "--max-port", "49252",
                # As production coturn is set up: no relaying to private addresses. (Without it,
                # coturn 4.6.1 relays to the receiver's 10.2.0.2 host candidate, the send fails
                # with ENETUNREACH here, and that relay port stops forwarding altogether.)
                "--denied-peer-ip", "10.0.0.0-10.255.255.255",
                "--log-file", str(self.log_path), "--simple-log", "--verbose", "--new-log-timestamp-format", "%H:%M:%S"]
        if self.lifetime:
            # Caps the 600 s castd asks for.
            args += [f"--max-allocate-lifetime={self.lifetime}"]
        if self.stale_nonce:
            # Nonces expire: requests after that get 438 Stale Nonce and must retry.
            args += [f"--stale-nonce={self.stale_nonce}"]
        self.coturn = subprocess.Popen(self.exec("pub", *args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            out = sh("ip", "netns", "exec", self.ns["pub"], "ss", "-lunH").stdout
            tcp = sh("ip", "netns", "exec", self.ns["pub"], "ss", "-ltnH").stdout
            if f"{TURN_IP}:{TURN_PORT}" in out and f"{TURN_IP}:{TURN_PORT}" in tcp and \
                    (not self.tls or f"{TURN_IP}:{TURNS_PORT}" in tcp):
                return
            if self.coturn.poll() is not None:
                raise RuntimeError(f"coturn exited: {self.coturn_log()[-2000:]}")
            time.sleep(0.05)   # polling a listening socket, not timing a race
        raise RuntimeError("coturn did not open its UDP listener within 10 s")

    def stop_coturn(self) -> None:
        if self.coturn and self.coturn.poll() is None:
            self.coturn.terminate()
            try:
                self.coturn.wait(5)
            except subprocess.TimeoutExpired:
                self.coturn.kill()
                self.coturn.wait()

    def __exit__(self, *exc) -> None:
        self.stop_coturn()
        for n in self.ns.values():
            for p in sh("ip", "netns", "pids", n, check=False).stdout.split():
                try:
                    os.kill(int(p), 9)
                except (ProcessLookupError, ValueError):
                    pass
            sh("ip", "netns", "del", n, check=False)
        shutil.rmtree(self.pki, ignore_errors=True)

    # ------------------------------------------------------------------ helpers

    def credentials(self, ttl: int = 3600, secret: str | None = None) -> tuple[str, str]:
        """TURN REST credentials exactly as the stack's ice-config computes them."""
        return turn_credentials(secret or self.secret, "castd-test", int(time.time()) + ttl)

    def coturn_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    @staticmethod
    def available() -> str | None:
        if os.geteuid() != 0:
            return "needs root (network namespaces, nftables)"
        for tool in ("turnserver", "nft", "ip", "ffmpeg", "openssl"):
            if not shutil.which(tool):
                return f"{tool} is not installed (Scripts/bootstrap installs it)"
        return None


class NamedNetns(Netns):
    """An existing namespace made by TurnWorld, entered with Netns.entered()."""

    def __init__(self, name: str):
        self.name = name


async def start_sender(world: TurnWorld, clip, user: str, credential: str, *extra: str, ns: str = "c") -> DevSender:
    """castd dev-send in namespace `ns` of the world, casting `clip` with only coturn as its TURN server."""
    proc = await asyncio.create_subprocess_exec(
        *world.exec(ns, castd_binary(), "dev-send", "--h264", str(clip), "--no-loopback",
                    "--turn", TURN_URL, "--turn-user", user, "--turn-credential", credential, *extra),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    return DevSender(proc)


async def answer_from(world: TurnWorld, sender: DevSender, frames_wanted: int, ns: str = "r"):
    """aiortc with its sockets in the receiver's namespace (it gathers in setLocalDescription),
    so it sees only its own NAT; coturn is its STUN server."""
    from aiortc import RTCConfiguration, RTCIceServer, RTCPeerConnection
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[RTCIceServer(urls=f"stun:{TURN_IP}:{TURN_PORT}")]))
    return await answer_with_aiortc(sender, frames_wanted, pc=pc, gather_in=NamedNetns(world.ns[ns]).entered, wait_s=25)
