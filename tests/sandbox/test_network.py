"""Network policy `egress`: public package registries work, the host and its networks do not."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from burrow.sandbox.local import LocalBackend, LocalSandbox
from burrow.sandbox.network import host_addresses
from tests.conftest import unavailable
from tests.sandbox.harness import TEST_LIMITS, run
from tests.sandbox.test_escape import CONNECT


@pytest.fixture
async def egress(tmp_path: Path) -> AsyncIterator[LocalSandbox]:
    if shutil.which("slirp4netns") is None:  # a skip locally, a failure in CI
        unavailable("slirp4netns (make sandbox-tools installs it)")
    backend = LocalBackend(tmp_path / "data", limits=TEST_LIMITS, network="egress")
    try:
        yield await backend.create("egress")
    finally:
        await backend.close()


@pytest.fixture
async def listener() -> AsyncIterator[int]:
    server = await asyncio.start_server(lambda r, w: w.close(), "0.0.0.0", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def test_the_host_and_private_ranges_are_unreachable(
    egress: LocalSandbox, listener: int
) -> None:
    # 10.0.2.2 is slirp's alias for the host's loopback, cut by --disable-host-loopback.
    targets = ["127.0.0.1", "10.0.2.2", *(a for a in host_addresses() if a != "127.0.0.1")]
    for port in (5432, listener):
        result = await run(egress, "python3", "-c", CONNECT, str(port), *targets)
        assert result.text.count("refused") == len(targets), result.text
    routes = (await run(egress, "ip", "route")).text
    for blocked in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"):
        assert f"unreachable {blocked}" in routes
    # and the sandbox cannot lift the fence
    lift = await run(egress, "ip", "route", "del", "unreachable", "10.0.0.0/8")
    assert lift.exit.exit_code != 0


async def test_pip_reaches_the_public_registry(egress: LocalSandbox) -> None:
    download = "python3 -m pip download --no-deps -q -d /tmp/wheels six==1.16.0 && ls /tmp/wheels"
    result = await run(egress, "sh", "-c", download, timeout=60)
    assert result.exit.exit_code == 0, result.stderr.decode()[-2000:]
    assert "six-1.16.0" in result.text
