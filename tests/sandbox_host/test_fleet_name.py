"""A sandbox host's name in a fleet (`--name` / BURROW_SANDBOX_HOST_NAME) starts every
sandbox id it makes, which is how the deployment's gateway finds a sandbox's host
(deploy/nginx, docs/scale-out.md); the stock SDK works with such ids unchanged."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from e2b import AsyncSandbox

from tests.sandbox_host.harness import Host, point_sdk_at, sandbox_host

pytestmark = pytest.mark.timeout(60)


async def test_a_named_hosts_sandbox_ids_start_with_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with sandbox_host(tmp_path / "data", BURROW_SANDBOX_HOST_NAME="burrow-sbx-0") as host:
        point_sdk_at(monkeypatch, host)
        await _create_run_kill(host)


async def _create_run_kill(host: Host) -> None:
    sandbox = await AsyncSandbox.create()
    try:
        assert sandbox.sandbox_id.startswith("burrow-sbx-0-i")
        assert (await sandbox.commands.run("echo named")).stdout == "named\n"
        await sandbox.files.write("note.txt", "by id")
        again = await AsyncSandbox.connect(sandbox.sandbox_id)  # the REST path carries it
        assert await again.files.read("note.txt") == "by id"
    finally:
        await sandbox.kill()


@pytest.mark.parametrize("name", ["Sbx1", "-sbx", "sbx_1", "a" * 41, "sbx.1", "sbx-"])
def test_a_name_that_cannot_start_a_host_name_is_refused(tmp_path: Path, name: str) -> None:
    argv = [sys.executable, "-m", "burrow.cli", "sandbox-host", "--port", "1"]
    argv += ["--data-dir", str(tmp_path), f"--name={name}"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert "BURROW_SANDBOX_HOST_NAME" in done.stderr and repr(name) in done.stderr
