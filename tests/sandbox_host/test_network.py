"""E2B's network options through the stock SDK: each is honoured, or refused with a 400
that names it; none is accepted and ignored. The host here allows egress through its
allowlisting proxy (BURROW_SANDBOX_ALLOW_DOMAINS), so what a sandbox may reach is seen
from inside it: whether the proxy is there at all, and what it lets through."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from e2b import ALL_TRAFFIC, AsyncSandbox, SandboxException

from burrow.sandbox.allowlist import DomainAllowlist
from burrow.sandbox.e2b import E2BBackend
from tests.sandbox.harness import run
from tests.sandbox_host.harness import API_KEY, Host, sandbox_host

pytestmark = pytest.mark.timeout(90)

HOST_ALLOWS = "pypi.org,registry.npmjs.org,*.githubusercontent.com"
# Asks the allowlisting proxy (where the sandbox's egress goes) for each name, or says that
# there is no way out at all: no proxy to ask, and no route to an address.
REACH = r"""
import socket, sys
try:
    socket.create_connection(("1.1.1.1", 443), timeout=3)
    print("direct: connected")
except OSError as exc:
    print("direct: failed")
for name in sys.argv[1:]:
    try:
        sock = socket.create_connection(("127.0.0.1", 3128), timeout=5)
    except OSError:
        print(name, "no proxy")
        continue
    sock.sendall(f"CONNECT {name}:443 HTTP/1.1\r\nHost: {name}:443\r\n\r\n".encode())
    answer = sock.recv(4096).decode(errors="replace")
    print(name, "not allowed" if "not among the names" in answer else "allowed")
"""


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    """This module's host (conftest's `sdk` points the SDK at it): egress through its
    allowlisting proxy."""
    data = tmp_path_factory.mktemp("sandbox-host-network") / "data"
    with sandbox_host(
        data, BURROW_SANDBOX_NETWORK="egress", BURROW_SANDBOX_ALLOW_DOMAINS=HOST_ALLOWS
    ) as running:
        yield running


@pytest.fixture
async def made(sdk: Host) -> AsyncIterator[list[AsyncSandbox]]:
    sandboxes: list[AsyncSandbox] = []
    try:
        yield sandboxes
    finally:
        for sandbox in sandboxes:
            await sandbox.kill()


async def reach(sandbox: AsyncSandbox, *names: str) -> dict[str, str]:
    await sandbox.files.write("reach.py", REACH)
    result = await sandbox.commands.run(f"python3 reach.py {' '.join(names)}", timeout=30)
    return _parsed(result.stdout)


def _parsed(out: str) -> dict[str, str]:
    return dict(line.split(": ", 1) if ": " in line else line.split(" ", 1)
                for line in out.splitlines())  # fmt: skip


async def test_deny_all_out_leaves_no_way_out(made: list[AsyncSandbox]) -> None:
    default = await AsyncSandbox.create()
    made.append(default)
    assert await reach(default, "pypi.org", "example.com") == {
        "direct": "failed",  # the host's own policy: through the proxy only
        "pypi.org": "allowed",
        "example.com": "not allowed",
    }
    closed = await AsyncSandbox.create(network={"deny_out": [ALL_TRAFFIC]})
    made.append(closed)
    assert await reach(closed, "pypi.org") == {"direct": "failed", "pypi.org": "no proxy"}
    # The SDK's older switch says the same.
    off = await AsyncSandbox.create(allow_internet_access=False)
    made.append(off)
    assert await reach(off, "pypi.org") == {"direct": "failed", "pypi.org": "no proxy"}


async def test_allow_out_narrows_the_hosts_allowlist(made: list[AsyncSandbox]) -> None:
    narrowed = await AsyncSandbox.create(
        network={"allow_out": ["pypi.org", "example.com"], "deny_out": [ALL_TRAFFIC]}
    )
    made.append(narrowed)
    # pypi.org: asked and the host's; registry.npmjs.org: the host's, not asked;
    # example.com: asked, not the host's (a client narrows, never widens).
    assert await reach(narrowed, "pypi.org", "registry.npmjs.org", "example.com") == {
        "direct": "failed",
        "pypi.org": "allowed",
        "registry.npmjs.org": "not allowed",
        "example.com": "not allowed",
    }
    # Nothing left of what it asked for: no network at all, not the host's whole list.
    nothing = await AsyncSandbox.create(
        network={"allow_out": ["example.com"], "deny_out": [ALL_TRAFFIC]}
    )
    made.append(nothing)
    assert await reach(nothing, "pypi.org") == {"direct": "failed", "pypi.org": "no proxy"}


async def test_burrows_e2b_backend_asks_for_the_same(host: Host) -> None:
    """Burrow's own e2b backend (the client side) says its policy in these options: a
    conversation without network, and one held to names, get exactly that."""
    api = {"api_key": API_KEY, "api_url": host.url, "sandbox_url": host.url}
    backend = E2BBackend(api=api, hibernation="files", network="egress")
    closed = await backend.create("conv-closed", network="none")
    named = await backend.create("conv-named", allow_domains=DomainAllowlist.parse("pypi.org"))
    try:
        for sandbox, expected in (
            (
                closed,
                {"direct": "failed", "pypi.org": "no proxy", "registry.npmjs.org": "no proxy"},
            ),
            (
                named,
                {"direct": "failed", "pypi.org": "allowed", "registry.npmjs.org": "not allowed"},
            ),
        ):
            await sandbox.write_file("reach.py", REACH.encode())
            done = await run(sandbox, "python3", "reach.py", "pypi.org", "registry.npmjs.org")
            assert _parsed(done.text) == expected
    finally:
        await backend.destroy("conv-closed")
        await backend.destroy("conv-named")


async def test_allow_out_survives_a_pause(made: list[AsyncSandbox]) -> None:
    sandbox = await AsyncSandbox.create(
        network={"allow_out": ["registry.npmjs.org"], "deny_out": [ALL_TRAFFIC]}
    )
    made.append(sandbox)
    await sandbox.pause()
    resumed = await AsyncSandbox.connect(sandbox.sandbox_id)
    assert await reach(resumed, "registry.npmjs.org", "pypi.org") == {
        "direct": "failed",
        "registry.npmjs.org": "allowed",
        "pypi.org": "not allowed",
    }


@pytest.mark.parametrize(
    ("network", "named"),
    [
        ({"deny_out": ["1.1.1.1"]}, "denyOut '1.1.1.1'"),
        ({"deny_out": [ALL_TRAFFIC], "allow_out": ["10.0.0.0/8"]}, "allowOut '10.0.0.0/8'"),
        ({"deny_out": [ALL_TRAFFIC], "allow_out": ["bad name!"]}, "allowOut 'bad name!'"),
        ({"dns_servers": ["1.1.1.1"]}, "dnsServers"),
        ({"egress_proxy": {"address": "proxy.example.com:1080"}}, "egressProxy"),
        ({"mask_request_host": "x\r\nInjected: 1"}, "maskRequestHost"),
        ({"https_ports": [443]}, "httpsPorts"),
        ({"deny_out": [ALL_TRAFFIC], "allow_out": ["a.example.com"] * 101}, "at most 100"),
    ],
)
async def test_an_option_the_host_cannot_honour_is_refused(
    sdk: Host, network: dict[str, object], named: str
) -> None:
    before = await _count(sdk)
    with pytest.raises(SandboxException) as refused:
        await AsyncSandbox.create(network=network)  # type: ignore[arg-type]
    assert named in str(refused.value)
    assert await _count(sdk) == before  # and nothing was made


async def test_unknown_network_fields_are_refused_not_ignored(sdk: Host) -> None:
    async with httpx.AsyncClient(base_url=sdk.url, timeout=10) as client:
        headers = {"X-API-KEY": API_KEY}
        answer = await client.post(
            "/sandboxes", json={"templateID": "base", "network": {"denyAll": True}}, headers=headers
        )
        assert answer.status_code == 400
        assert answer.json()["error_code"] == "invalid_network"
        assert "network.denyAll" in answer.json()["message"]
        answer = await client.post(
            "/sandboxes", json={"templateID": "base", "network": "closed"}, headers=headers
        )
        assert answer.status_code == 400


async def test_public_traffic_and_the_request_host(sdk: Host, made: list[AsyncSandbox]) -> None:
    public = await AsyncSandbox.create(
        network={"allow_public_traffic": True, "mask_request_host": "${PORT}-app.example.com"}
    )
    private = await AsyncSandbox.create()
    made.extend([public, private])
    for sandbox in (public, private):
        await sandbox.files.write("host.py", ECHO_HOST)
        await sandbox.commands.run("exec python3 host.py", background=True)
    async with httpx.AsyncClient(base_url=sdk.url, timeout=10) as client:
        port = {"E2b-Sandbox-Port": "8000"}
        seen = await _get(client, {"E2b-Sandbox-Id": public.sandbox_id, **port})
        assert (seen.status_code, seen.text) == (200, "8000-app.example.com")
        # Its envd still takes the access token only.
        envd = {"E2b-Sandbox-Id": public.sandbox_id, "E2b-Sandbox-Port": "49983"}
        assert (await client.get("/health", headers=envd)).status_code == 401
        # Without the option the host's default holds: a port needs a token.
        closed = await client.get("/", headers={"E2b-Sandbox-Id": private.sandbox_id, **port})
        assert closed.status_code == 401
        token = {"X-Access-Token": private._envd_access_token or ""}
        seen = await _get(client, {"E2b-Sandbox-Id": private.sandbox_id, **port, **token})
        assert seen.text == "localhost:8000"


ECHO_HOST = """
from http.server import BaseHTTPRequestHandler, HTTPServer
class Echo(BaseHTTPRequestHandler):
    def do_GET(self):
        body = self.headers.get("Host", "").encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
HTTPServer(("127.0.0.1", 8000), Echo).serve_forever()
"""


async def _get(client: httpx.AsyncClient, headers: dict[str, str]) -> httpx.Response:
    for _ in range(100):  # until the server listens
        answer = await client.get("/", headers=headers)
        if answer.status_code != 502:
            return answer
        await asyncio.sleep(0.1)
    return answer


async def _count(host: Host) -> int:
    async with httpx.AsyncClient(base_url=host.url, timeout=10) as client:
        listed = await client.get("/sandboxes", headers={"X-API-KEY": API_KEY})
        return len(listed.json())
