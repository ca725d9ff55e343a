"""A restarted sandbox host still knows its sandboxes (paused, files kept): after a clean
stop, after being killed outright, and with an unreadable ledger."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from e2b import AsyncSandbox, SandboxQuery, SandboxState
from e2b.exceptions import NotFoundException

from tests.sandbox_host.harness import OTHER_KEY, point_sdk_at, sandbox_host

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL])
async def test_sandboxes_survive_a_host_restart_paused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop: signal.Signals
) -> None:
    data_dir = tmp_path / "data"
    with sandbox_host(data_dir) as host:
        point_sdk_at(monkeypatch, host)
        sandbox = await AsyncSandbox.create(metadata={"who": "restart"})
        await sandbox.files.write("kept.txt", "across restarts")
        await sandbox.commands.run("sleep 300", background=True)
        host.process.send_signal(stop)
        host.process.wait(15)
    assert (data_dir / "sandbox-host.json").stat().st_mode & 0o777 == 0o600

    with sandbox_host(data_dir) as host:
        point_sdk_at(monkeypatch, host)
        listed = await AsyncSandbox.list(
            query=SandboxQuery(metadata={"who": "restart"})
        ).next_items()
        assert [(s.sandbox_id, s.state) for s in listed] == [
            (sandbox.sandbox_id, SandboxState.PAUSED)
        ]
        resumed = await AsyncSandbox.connect(sandbox.sandbox_id)
        assert await resumed.files.read("kept.txt") == "across restarts"
        assert await resumed.commands.list() == []  # its processes ended with the old host

        point_sdk_at(monkeypatch, host, OTHER_KEY)
        with pytest.raises(NotFoundException):
            await AsyncSandbox.get_info(sandbox.sandbox_id)
        point_sdk_at(monkeypatch, host)
        await resumed.kill()

    with sandbox_host(data_dir) as host:  # killed: gone for good, files too
        point_sdk_at(monkeypatch, host)
        assert await AsyncSandbox.list().next_items() == []
    assert not (data_dir / "workspaces" / sandbox.sandbox_id).exists()


async def test_an_unreadable_ledger_is_set_aside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir(parents=True)
    (data_dir / "sandbox-host.json").write_text("{not json")
    with sandbox_host(data_dir) as host:
        point_sdk_at(monkeypatch, host)
        assert await AsyncSandbox.list().next_items() == []
        created = await AsyncSandbox.create()
        await created.kill()
    assert (data_dir / "sandbox-host.json.unreadable").read_text() == "{not json"
