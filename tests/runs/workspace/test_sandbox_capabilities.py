"""The sandbox pool reads the backend's capabilities, not its type: a backend whose
hibernation keeps memory (E2B's pause) resumes with its services running, and they are not
started a second time; a files-only one has them started again."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from burrow.runs.journal.journal import Journal
from burrow.runs.workspace.sandboxes import SandboxPool
from burrow.sandbox.backend import Sandbox
from burrow.sandbox.local import LocalBackend
from burrow.store.accounts import AccountStore
from burrow.store.conversations import ConversationStore
from burrow.store.events import EventStore
from burrow.store.migrate import open_database
from tests.sandbox.harness import run

# Each start appends a line to starts.log, then serves the workspace on port 8000.
SERVICE = {
    "port": 8000,
    "command": "echo start >> starts.log && exec python3 -m http.server 8000 --bind 127.0.0.1",
    "cwd": "/workspace",
}
WAIT_FOR_PORT = (
    "for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/8000) 2>/dev/null && exit 0; "
    "sleep 0.05; done; exit 1"
)


class MemoryKeepingBackend(LocalBackend):
    """A local backend whose hibernation keeps every process, as a memory pause does."""

    capabilities = dataclasses.replace(LocalBackend.capabilities, hibernation="memory")

    async def hibernate(self, sandbox: Sandbox) -> None:
        pass  # the machine sleeps with its processes; `create` finds it ready


@pytest.fixture
async def journal_and_cid(tmp_path: Path) -> AsyncIterator[tuple[Journal, str]]:
    db = await open_database(f"sqlite+aiosqlite:///{tmp_path / 'c.db'}")
    user = await AccountStore(db).get_or_create("alice")
    cid = (await ConversationStore(db).create(user.id, "t")).id
    yield Journal(EventStore(db)), cid
    await db.close()


@pytest.mark.parametrize(("keeps_memory", "starts"), [(True, 1), (False, 2)])
async def test_services_start_again_only_when_hibernation_stopped_them(
    tmp_path: Path, journal_and_cid: tuple[Journal, str], keeps_memory: bool, starts: int
) -> None:
    journal, cid = journal_and_cid
    kind = MemoryKeepingBackend if keeps_memory else LocalBackend
    backend = kind(tmp_path / "data")
    pool = SandboxPool(backend, journal, idle_seconds=None)
    try:
        sandbox = await pool.get(cid)
        await sandbox.write_file(".burrow/services.json", json.dumps([SERVICE]).encode())
        await pool.restart(cid)  # the recorded service starts, as after any boot
        assert (await run(await pool.get(cid), "bash", "-c", WAIT_FOR_PORT)).exit.exit_code == 0
        assert await pool.hibernate(cid)
        awake = await pool.get(cid)
        assert (await run(awake, "bash", "-c", WAIT_FOR_PORT)).exit.exit_code == 0
        log = (await awake.read_file("starts.log")).decode()
        assert log.count("start") == starts, log
        detail = pool.state(cid).detail
        assert ("running" in detail) == keeps_memory, detail
    finally:
        await pool.close()
