"""Egress with BURROW_SANDBOX_ALLOW_DOMAINS: the sandbox reaches only the allowlisting proxy,
which lets listed names through and refuses the rest, private addresses included."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from burrow.sandbox import network
from burrow.sandbox.allowlist import DomainAllowlist
from burrow.sandbox.egress_proxy import AllowlistProxy, ProxyLimits
from burrow.sandbox.local import LocalBackend, LocalSandbox
from tests.sandbox.harness import TEST_LIMITS, run

ALLOWED = "registry.npmjs.org,localhost,*.npmjs.com,pypi.org,files.pythonhosted.org"

# Speaks to the proxy as a client would, prints its status line and body.
ASK_PROXY = """
import socket, sys
sock = socket.create_connection(("127.0.0.1", 3128), timeout=20)
sock.sendall(sys.argv[1].encode().decode("unicode_escape").encode())
answer = b""
while chunk := sock.recv(65536):
    answer += chunk
    if b"\\r\\n\\r\\n" in answer and sys.argv[1].startswith("CONNECT") and b" 200 " in answer:
        break
print(answer.decode(errors="replace"))
"""

DIRECT = """
import socket, sys
for address in sys.argv[1:]:
    try:
        socket.create_connection((address, 443), timeout=5)
        print(address, "connected")
    except OSError as exc:
        print(address, "failed", exc)
"""


@pytest.fixture
async def fenced(tmp_path: Path) -> AsyncIterator[LocalSandbox]:
    backend = LocalBackend(
        tmp_path / "data",
        limits=TEST_LIMITS,
        network="egress",
        allow_domains=DomainAllowlist.parse(ALLOWED),
    )
    try:
        yield await backend.create("fenced")
    finally:
        await backend.close()


async def test_an_allowed_domain_works_through_the_proxy_with_curl(fenced: LocalSandbox) -> None:
    result = await run(
        fenced,
        "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "https://registry.npmjs.org/react",
        timeout=60,
    )  # fmt: skip
    assert result.exit.exit_code == 0, result.stderr.decode()
    assert result.text == "200"


async def test_npm_and_pip_find_the_proxy_on_their_own(fenced: LocalSandbox) -> None:
    npm = await run(fenced, "npm", "view", "react", "version", timeout=90)
    assert npm.exit.exit_code == 0, npm.stderr.decode()[-2000:]
    assert npm.text.strip().split(".")[0].isdigit()
    pip = "python3 -m pip download --no-deps -q -d /tmp/wheels six==1.16.0 && ls /tmp/wheels"
    result = await run(fenced, "sh", "-c", pip, timeout=90)
    assert result.exit.exit_code == 0, result.stderr.decode()[-2000:]
    assert "six-1.16.0" in result.text


async def test_a_domain_not_on_the_list_gets_a_403_naming_the_setting(
    fenced: LocalSandbox,
) -> None:
    https = await run(
        fenced, "python3", "-c", ASK_PROXY, "CONNECT example.com:443 HTTP/1.1\\r\\n\\r\\n"
    )
    assert https.text.startswith("HTTP/1.1 403"), https.text
    assert "BURROW_SANDBOX_ALLOW_DOMAINS" in https.text and "example.com" in https.text
    plain = "GET http://example.com/ HTTP/1.1\\r\\nHost: example.com\\r\\n\\r\\n"
    assert (await run(fenced, "python3", "-c", ASK_PROXY, plain)).text.startswith("HTTP/1.1 403")
    # An allowed URL with another Host: the Host header is not where the check looks, and
    # it is not what is sent either (we get the allowed host's answer, or a refusal).
    fronted = "GET http://localhost/ HTTP/1.1\\r\\nHost: example.com\\r\\n\\r\\n"
    assert (await run(fenced, "python3", "-c", ASK_PROXY, fronted)).text.startswith("HTTP/1.1 403")
    # and curl fails
    curl = await run(fenced, "curl", "-sS", "https://example.com/", timeout=30)
    assert curl.exit.exit_code != 0 and "403" in curl.stderr.decode()


async def test_a_name_resolving_to_loopback_is_refused(fenced: LocalSandbox) -> None:
    # `localhost` is on the list, but it resolves to the host's own loopback.
    result = await run(
        fenced, "python3", "-c", ASK_PROXY, "CONNECT localhost:5432 HTTP/1.1\\r\\n\\r\\n"
    )
    assert result.text.startswith("HTTP/1.1 403"), result.text
    assert "127.0.0.1" in result.text


async def test_direct_connections_bypassing_the_proxy_fail(fenced: LocalSandbox) -> None:
    # Public addresses (npm's, Cloudflare's, TEST-NET) and the host: no route at all.
    targets = ["104.16.0.35", "1.1.1.1", "192.0.2.1", "10.0.2.2"]
    result = await run(fenced, "python3", "-c", DIRECT, *targets, timeout=60)
    assert result.text.count("failed") == len(targets), result.text
    routes = (await run(fenced, "cat", "/proc/net/route")).text
    assert len(routes.strip().splitlines()) == 1  # the header: no route anywhere
    # names do not resolve inside either: the proxy resolves them, on the host
    lookup = await run(fenced, "getent", "hosts", "registry.npmjs.org", timeout=30)
    assert lookup.exit.exit_code != 0


async def test_commands_get_the_proxy_in_their_environment(fenced: LocalSandbox) -> None:
    env = (await run(fenced, "env")).text
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        assert f"{name}=http://127.0.0.1:3128" in env
    assert "NO_PROXY=localhost,127.0.0.1,::1" in env


async def test_the_proxy_port_cannot_be_taken_by_the_sandbox(fenced: LocalSandbox) -> None:
    take = "import socket; s = socket.socket(); s.bind(('127.0.0.1', 3128))"
    result = await run(fenced, "python3", "-c", take)
    assert result.exit.exit_code != 0 and "Address already in use" in result.stderr.decode()


async def test_without_an_allowlist_egress_has_no_proxy(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path / "data", limits=TEST_LIMITS, network="none")
    try:
        sandbox = await backend.create("plain", network="none")
        env = (await run(sandbox, "env")).text
        assert "HTTPS_PROXY" not in env
        assert backend.network_plan("none").policy == "none"
    finally:
        await backend.close()


# The proxy's own bounds, served on a host socket: no sandbox needed to count connections.
@pytest.fixture
async def bounded() -> AsyncIterator[tuple[AllowlistProxy, int]]:
    proxy = AllowlistProxy(
        DomainAllowlist.parse("registry.npmjs.org,localhost"),
        limits=ProxyLimits(max_connections=2, idle_seconds=0.5),
    )
    sock = socket.create_server(("127.0.0.1", 0))
    sock.setblocking(False)
    await proxy.serve(sock)
    try:
        yield proxy, sock.getsockname()[1]
    finally:
        await proxy.close()


async def test_connections_per_sandbox_are_bounded(bounded: tuple[AllowlistProxy, int]) -> None:
    _, port = bounded
    held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answer = await asyncio.wait_for(reader.read(), 5)
    assert answer.startswith(b"HTTP/1.1 503") and b"limit" in answer
    writer.close()
    for _, w in held:
        w.close()


async def test_an_idle_connection_is_closed(bounded: tuple[AllowlistProxy, int]) -> None:
    _, port = bounded
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    started = time.monotonic()
    assert await asyncio.wait_for(reader.read(), 5) == b""  # closed, nothing said
    assert 0.4 < time.monotonic() - started < 3
    writer.close()


async def test_a_flood_of_headers_is_refused(bounded: tuple[AllowlistProxy, int]) -> None:
    _, port = bounded
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"CONNECT registry.npmjs.org:443 HTTP/1.1\r\n" + b"X: " + b"a" * 100_000)
    answer = await asyncio.wait_for(reader.read(), 5)
    assert answer.startswith(b"HTTP/1.1 431")
    writer.close()


@pytest.mark.parametrize(
    "request_line",
    [
        b"CONNECT registry.npmjs.org:99999 HTTP/1.1",
        b"GET / HTTP/1.1",  # no Host: nowhere to go
        b"GET https://registry.npmjs.org/ HTTP/1.1",  # https goes through CONNECT
        b"GET http://registry.npmjs.org:x/ HTTP/1.1",
        b"nonsense",
    ],
)
async def test_malformed_requests_get_a_400(
    bounded: tuple[AllowlistProxy, int], request_line: bytes
) -> None:
    _, port = bounded
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request_line + b"\r\n\r\n")
    assert (await asyncio.wait_for(reader.read(), 5)).startswith(b"HTTP/1.1 400")
    writer.close()


@pytest.mark.parametrize(
    ("address", "refused"),
    [
        ("127.0.0.1", True),
        ("10.1.2.3", True),
        ("172.20.0.1", True),
        ("192.168.1.1", True),
        ("169.254.169.254", True),  # cloud metadata
        ("100.64.0.1", True),
        ("0.0.0.0", True),
        ("::1", True),
        ("::", True),
        ("fe80::1", True),
        ("fd00::1", True),
        ("::ffff:127.0.0.1", True),  # IPv4-mapped loopback
        ("::ffff:10.0.0.1", True),
        ("104.16.0.35", False),
        ("2606:4700::6810:1", False),
        ("203.0.113.80", False),  # TEST-NET: routed like a public address here, as by slirp
    ],
)
def test_the_proxy_fences_what_slirp_egress_fences(address: str, refused: bool) -> None:
    assert network.fenced(address) is refused


def test_the_hosts_own_addresses_are_fenced() -> None:
    assert network.fenced("198.51.100.7", ["198.51.100.7"])
    assert not network.fenced("198.51.100.8", ["198.51.100.7"])
