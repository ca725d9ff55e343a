from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from e2b import AsyncSandbox

from tests.sandbox_host.harness import Host, point_sdk_at, sandbox_host


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    """One sandbox host per test module: starting it is the slow part."""
    with sandbox_host(tmp_path_factory.mktemp("sandbox-host") / "data") as running:
        yield running


@pytest.fixture
def sdk(host: Host, monkeypatch: pytest.MonkeyPatch) -> Host:
    point_sdk_at(monkeypatch, host)
    return host


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
async def sandbox(sdk: Host) -> AsyncIterator[AsyncSandbox]:
    """A sandbox the stock SDK created on the test's host, killed after the test."""
    created = await AsyncSandbox.create()
    yield created
    await created.kill()
