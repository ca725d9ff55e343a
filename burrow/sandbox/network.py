"""A sandbox's network policy: `none` (loopback only) or `egress` (outbound, user-mode).

With a domain allowlist (`BURROW_SANDBOX_ALLOW_DOMAINS`) egress takes another road: no
slirp4netns at all, the namespace keeps loopback only, and the server listens on the
sandbox's own 127.0.0.1:3128 with a socket it made inside that namespace
(`listen_in_namespace`): the allowlisting proxy (egress_proxy.py) is then the one way out,
and the host's own ports stay unreachable. (slirp4netns offers no port-level forward from
the guest to the host: without `--disable-host-loopback` its 10.0.2.2 would open every port
of the host's loopback, the API and the database included.)

Egress plugs slirp4netns into the sandbox's network namespace: a user-mode TCP/IP stack
that turns the sandbox's connections into ordinary sockets of an unprivileged host
process, so the sandbox gets no interface on the host's networks. The host's loopback is
cut (`--disable-host-loopback`), and "unreachable" routes inside the namespace refuse the
private, link-local and shared ranges and every address of this host before a packet
leaves: the Burrow API, a database or a metadata service on the LAN stay out of reach,
while public registries (PyPI, npm) work. DNS goes through slirp's forwarder (10.0.2.3).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Iterable
from pathlib import Path

from burrow.sandbox.backend import ErrorCode, SandboxError
from burrow.sandbox.backend import NetworkPolicy as NetworkPolicy  # named here too

SLIRP_DNS = "10.0.2.3"
BLOCKED_RANGES = (
    "0.0.0.0/8",
    "10.0.0.0/8",  # slirp's own 10.0.2.0/24 stays reachable: its route is more specific
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",  # cloud metadata services
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "224.0.0.0/3",  # multicast and reserved
)
# The same fence for the allowlisting proxy's destinations, plus IPv6's loopback,
# unspecified, link-local, unique-local and multicast ranges. Not `is_global`: TEST-NET
# and benchmarking ranges are routed like public ones on some networks (mirrors).
FENCED_NETWORKS = tuple(
    ipaddress.ip_network(r)
    for r in (*BLOCKED_RANGES, "255.255.255.255/32", "::/127", "fe80::/10", "fc00::/7", "ff00::/8")
)
READY_TIMEOUT = 5.0
PROXY_PORT = 3128  # on the sandbox's own loopback, made before any of its code runs
CLONE_NEWNET = 0x40000000


def proxy_env() -> dict[str, str]:
    """What points npm, pip, git and curl at the allowlisting proxy; loopback stays direct
    (the sandbox's own dev servers)."""
    url = f"http://127.0.0.1:{PROXY_PORT}"
    no_proxy = "localhost,127.0.0.1,::1"
    return {
        "HTTP_PROXY": url,
        "HTTPS_PROXY": url,
        "http_proxy": url,
        "https_proxy": url,
        "NO_PROXY": no_proxy,
        "no_proxy": no_proxy,
    }


def egress_unavailable() -> str | None:
    """Why slirp-based egress cannot work on this host, or None when it can."""
    if shutil.which("slirp4netns") is None:
        return (
            "slirp4netns is not installed (`make sandbox-tools` or `apt-get install slirp4netns`)"
        )
    return None


def listen_in_namespace(sandbox_pid: int, port: int = PROXY_PORT) -> socket.socket:
    """A listening TCP socket on 127.0.0.1:`port` of the sandbox's network namespace.

    A socket belongs to the namespace it was created in, whatever thread later uses it:
    a short-lived thread joins the namespace (setns affects the calling thread only),
    makes the socket and ends; the server then accepts on it like on any other.
    """
    made: list[socket.socket] = []
    failed: list[str] = []

    def make() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/proc/{sandbox_pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                failed.append(f"setns: {os.strerror(ctypes.get_errno())}")
                return
        finally:
            os.close(fd)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen(128)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            failed.append(str(exc))
            return
        made.append(sock)

    thread = threading.Thread(target=make, name="burrow-netns-listen")
    try:
        thread.start()
        thread.join()
    except OSError as exc:
        failed.append(str(exc))
    if not made:
        raise SandboxError(
            ErrorCode.BOOT_FAILED,
            f"Could not open the egress proxy inside the sandbox ({'; '.join(failed)}); "
            "the allowlist needs root (or unset BURROW_SANDBOX_ALLOW_DOMAINS).",
        )
    return made[0]


def host_addresses() -> list[str]:
    """This host's own IPv4 addresses (a service bound to 0.0.0.0 listens on each)."""
    found: set[str] = set()
    with contextlib.suppress(OSError):
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            found.add(str(info[4][0]))
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        listing = subprocess.run(
            ["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, timeout=5
        ).stdout
        for line in listing.splitlines():
            fields = line.split()
            if "inet" in fields:
                found.add(fields[fields.index("inet") + 1].split("/")[0])
    return sorted(found)


def fenced(address: str, host_addresses: Iterable[str] = ()) -> bool:
    """Whether egress may not reach `address` (an IPv4-mapped IPv6 counts as its IPv4)."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip) in set(host_addresses) or any(ip in net for net in FENCED_NETWORKS)


def resolv_conf(runtime_dir: Path) -> Path:
    path = runtime_dir / "resolv.conf"
    if not path.exists():
        path.write_text(f"nameserver {SLIRP_DNS}\n")
        path.chmod(0o644)  # bwrap reads it as the sandbox's uid
    return path


class Egress:
    """slirp4netns serving one sandbox's network namespace."""

    def __init__(self) -> None:
        self._process: asyncio.subprocess.Process | None = None
        # slirp4netns exits once this pipe's write end closes: on stop(), and when the
        # server dies however it dies (kill -9 runs no stop(), and it would outlive us).
        self._exit_write = -1

    async def start(self, sandbox_pid: int) -> None:
        slirp = shutil.which("slirp4netns")
        if slirp is None:
            raise SandboxError(
                ErrorCode.BOOT_FAILED,
                "The egress network policy needs slirp4netns "
                "(`apt-get install slirp4netns`; `make sandbox-tools` installs it).",
            )
        ready_read, ready_write = os.pipe()
        exit_read, self._exit_write = os.pipe()
        try:
            self._process = await asyncio.create_subprocess_exec(
                slirp, "--configure", "--mtu=65520", "--disable-host-loopback",
                "--enable-sandbox", "--enable-seccomp", "--ready-fd", str(ready_write),
                "--exit-fd", str(exit_read),
                # By path, not pid: with a pid slirp4netns also joins the sandbox's user
                # namespace, which races bwrap writing its uid map (setns: EPERM under
                # load). As root it needs only the network namespace.
                "--netns-type=path", f"/proc/{sandbox_pid}/ns/net", "tap0",
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                pass_fds=(ready_write, exit_read),
                start_new_session=True,
            )  # fmt: skip
            os.close(ready_write)
            ready_write = -1
            async with asyncio.timeout(READY_TIMEOUT):
                ready = await asyncio.to_thread(os.read, ready_read, 1)
            if ready != b"1":
                raise SandboxError(ErrorCode.BOOT_FAILED, await self._failure("exited"))
        except TimeoutError:
            raise SandboxError(ErrorCode.BOOT_FAILED, await self._failure("timed out")) from None
        finally:
            os.close(ready_read)
            os.close(exit_read)
            if ready_write >= 0:
                os.close(ready_write)
        await self._block_private_ranges(sandbox_pid)

    async def _block_private_ranges(self, sandbox_pid: int) -> None:
        routes = [*BLOCKED_RANGES, *(f"{a}/32" for a in host_addresses())]
        script = "".join(f"route add unreachable {r}\n" for r in routes).encode()
        process = await asyncio.create_subprocess_exec(
            "nsenter", f"--net=/proc/{sandbox_pid}/ns/net", "ip", "-batch", "-",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, stderr = await process.communicate(script)
        if process.returncode != 0:
            await self.stop()
            raise SandboxError(
                ErrorCode.BOOT_FAILED,
                "Could not fence the sandbox off the host's networks "
                f"({stderr.decode(errors='replace').strip()}); egress needs root "
                "(nsenter and ip from iproute2).",
            )

    async def _failure(self, what: str) -> str:
        stderr = b""
        process = self._process
        if process is not None and process.stderr is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.5):
                    stderr = await process.stderr.read(4096)
        await self.stop()
        detail = stderr.decode(errors="replace").strip()
        return f"slirp4netns {what}{': ' + detail if detail else ''}"

    async def stop(self) -> None:
        if self._exit_write >= 0:
            os.close(self._exit_write)
            self._exit_write = -1
        process, self._process = self._process, None
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()


def read_child_pid(info: bytes) -> int:
    """The sandbox's pid on the host, from bwrap's --info-fd JSON."""
    try:
        return int(json.loads(info)["child-pid"])
    except (ValueError, KeyError, TypeError):
        raise SandboxError(
            ErrorCode.BOOT_FAILED, f"bubblewrap reported no child pid: {info[:200]!r}"
        ) from None
