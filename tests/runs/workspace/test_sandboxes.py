"""The sandbox pool as a unit, on the real local backend and a real SQLite journal, no
server: one start for many callers, hibernation when idle (files kept, services started
again on waking), never under a running command, a failed boot that stays failed until
restart, restart and destroy, and the per-owner cap. tests/api/test_sandbox_lifecycle.py
and test_quotas.py hold what crosses HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from burrow.runs.journal.journal import Journal, Subscription
from burrow.runs.workspace.quotas import SandboxQuotaExceeded
from burrow.runs.workspace.sandboxes import SandboxPool
from burrow.sandbox.backend import (
    ErrorCode,
    ExecChunk,
    ExecRequest,
    Sandbox,
    SandboxError,
    closing_exec,
)
from burrow.sandbox.local import LocalBackend
from burrow.store.accounts import AccountStore
from burrow.store.conversations import ConversationStore
from burrow.store.database import Database
from burrow.store.events import EventStore
from burrow.store.migrate import open_database
from tests.sandbox.harness import run

SERVICE = {
    "port": 8000,
    "command": "python3 -m http.server 8000 --bind 127.0.0.1",
    "cwd": "/workspace/site",
}
FETCH = """
import time, urllib.request
for _ in range(200):
    try:
        print(urllib.request.urlopen("http://127.0.0.1:8000/index.html", timeout=1).read().decode())
        break
    except OSError:
        time.sleep(0.05)
"""


class Conversations:
    """A journal on a real SQLite file and a way to add conversations to it."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.journal = Journal(EventStore(db))
        self.store = ConversationStore(db)

    async def new(self) -> str:
        user = await AccountStore(self.db).get_or_create("alice")
        return (await self.store.create(user.id, "t")).id

    async def statuses(self, cid: str) -> list[dict[str, Any]]:
        return [e.data for e in await self.journal.read(cid, 0) if e.type == "sandbox.status"]


@pytest.fixture
async def convs(tmp_path: Path) -> AsyncIterator[Conversations]:
    db = await open_database(f"sqlite+aiosqlite:///{tmp_path / 'pool.db'}")
    try:
        yield Conversations(db)
    finally:
        await db.close()


@pytest.fixture
async def new_pool(
    tmp_path: Path, convs: Conversations
) -> AsyncIterator[Callable[..., SandboxPool]]:
    """Pools on the real local backend (one data directory), all closed after the test."""
    pools: list[SandboxPool] = []

    def make(**options: Any) -> SandboxPool:
        options.setdefault("idle_seconds", None)
        pool = SandboxPool(LocalBackend(tmp_path / "data"), convs.journal, **options)
        pools.append(pool)
        return pool

    try:
        yield make
    finally:
        for pool in pools:
            await pool.close()


@contextlib.asynccontextmanager
async def busy(sandbox: Sandbox) -> AsyncIterator[None]:
    """A command runs in `sandbox` until the block ends (it is then killed)."""
    request = ExecRequest(argv=["sh", "-c", "echo started; exec sleep 60"])
    async with closing_exec(sandbox.exec(request)) as events:
        async for item in events:
            if isinstance(item, ExecChunk) and b"started" in item.data:
                break
        yield


async def reached(feed: Subscription, status: str, within: float = 60) -> None:
    """Waits for a `sandbox.status` event with `status`; the deadline is generous, the
    asserts after it are exact."""
    async with asyncio.timeout(within):
        while True:
            for event in await feed.wait(within):
                if event.type == "sandbox.status" and event.data["status"] == status:
                    return


async def test_concurrent_callers_share_one_start(
    convs: Conversations, new_pool: Callable[..., SandboxPool]
) -> None:
    pool, cid = new_pool(), await convs.new()
    assert pool.state(cid).status == "none" and pool.running(cid) is None
    first, second, third = await asyncio.gather(pool.get(cid), pool.get(cid), pool.get(cid))
    assert first is second is third
    assert pool.running(cid) is first and pool.state(cid).status == "ready"
    seen = await convs.statuses(cid)
    assert [s["status"] for s in seen] == ["starting", "ready"]
    assert seen[0]["detail"] == "Starting a local sandbox"
    assert pool.statuses() == {"ready": 1}


async def test_a_cancelled_caller_does_not_abort_the_start(
    convs: Conversations, new_pool: Callable[..., SandboxPool]
) -> None:
    pool, cid = new_pool(), await convs.new()
    with convs.journal.subscribe(cid) as feed:
        interrupted = asyncio.create_task(pool.get(cid))
        await reached(feed, "starting")
    interrupted.cancel()
    with pytest.raises(asyncio.CancelledError):
        await interrupted
    sandbox = await pool.get(cid)  # the same start, carried on
    assert sandbox.status == "ready"
    assert [s["status"] for s in await convs.statuses(cid)] == ["starting", "ready"]


async def test_an_idle_sandbox_hibernates_and_wakes_with_its_files_and_services(
    convs: Conversations, new_pool: Callable[..., SandboxPool]
) -> None:
    pool, cid = new_pool(idle_seconds=0.5), await convs.new()
    with convs.journal.subscribe(cid) as feed:
        sandbox = await pool.get(cid)
        await sandbox.write_file("site/index.html", b"hello from before")
        await sandbox.write_file(".burrow/services.json", json.dumps([SERVICE]).encode())
        await reached(feed, "hibernated")
    assert sandbox.status != "ready"  # every process stopped
    assert pool.running(cid) is None
    assert "idle for" in pool.state(cid).detail

    awake = await pool.get(cid)
    assert await awake.read_file("site/index.html") == b"hello from before"
    assert "hello from before" in (await run(awake, "python3", "-c", FETCH)).text
    seen = await convs.statuses(cid)
    assert [s["status"] for s in seen] == ["starting", "ready", "hibernated", "starting", "ready"]
    assert seen[3]["detail"] == "Waking the sandbox"
    assert "services started again on port(s) 8000" in seen[4]["detail"]


async def test_a_sandbox_running_a_command_is_never_hibernated(
    convs: Conversations, new_pool: Callable[..., SandboxPool]
) -> None:
    pool, cid = new_pool(), await convs.new()
    sandbox = await pool.get(cid)
    async with busy(sandbox):
        assert not await pool.hibernate(cid)
        assert pool.running(cid) is sandbox
    assert await pool.hibernate(cid, "for the test")
    assert pool.state(cid).detail == "for the test"
    assert not await pool.hibernate(cid)  # not running any more: nothing to do


async def test_a_failed_boot_stays_failed_until_restart(
    convs: Conversations, new_pool: Callable[..., SandboxPool]
) -> None:
    pool, cid = new_pool(), await convs.new()
    backend = pool.backend
    assert isinstance(backend, LocalBackend)
    working_python, backend.python = backend.python, "/nonexistent/python3"
    with pytest.raises(SandboxError) as first:
        await pool.get(cid)
    assert pool.state(cid).status == "failed"
    assert "/nonexistent/python3" in pool.state(cid).detail
    with pytest.raises(SandboxError) as second:  # no silent retry, no fallback to the host
        await pool.get(cid)
    assert first.value.code == second.value.code == ErrorCode.BOOT_FAILED
    assert "Restart it" in second.value.message
    assert [s["status"] for s in await convs.statuses(cid)] == ["starting", "failed"]

    backend.python = working_python
    restarted = await pool.restart(cid)
    assert restarted.status == "ready" and pool.running(cid) is restarted


async def test_restart_stops_processes_and_keeps_files(
    convs: Conversations, new_pool: Callable[..., SandboxPool]
) -> None:
    pool, cid = new_pool(), await convs.new()
    sandbox = await pool.get(cid)
    await sandbox.write_file("kept.txt", b"kept")
    await run(sandbox, "sh", "-c", "sleep 1000 > /dev/null 2>&1 &")
    fresh = await pool.restart(cid)
    assert (await run(fresh, "pgrep", "-x", "sleep")).exit.exit_code == 1
    assert await fresh.read_file("kept.txt") == b"kept"


async def test_destroy_forgets_the_sandbox_and_its_files(
    convs: Conversations, new_pool: Callable[..., SandboxPool]
) -> None:
    pool, cid = new_pool(), await convs.new()
    sandbox = await pool.get(cid)
    await sandbox.write_file("gone.txt", b"x")
    await pool.destroy(cid)
    assert sandbox.status != "ready"
    assert pool.state(cid).status == "none" and pool.running(cid) is None
    fresh = await pool.get(cid)
    with pytest.raises(SandboxError):
        await fresh.read_file("gone.txt")


async def test_at_the_cap_the_least_recently_used_idle_sandbox_makes_room(
    convs: Conversations, new_pool: Callable[..., SandboxPool]
) -> None:
    async def owner_of(cid: str) -> str:
        return "alice"

    pool = new_pool(owner_of=owner_of, max_per_owner=2)
    first, second, third = [await convs.new() for _ in range(3)]
    await pool.get(first)
    await pool.get(second)
    await pool.get(third)
    assert pool.state(first).status == "hibernated"
    assert "make room" in pool.state(first).detail
    assert pool.state(second).status == pool.state(third).status == "ready"

    # Both live sandboxes busy: a third is refused, and the refused one is not "failed".
    async with busy(await pool.get(third)):
        async with busy(await pool.get(second)):
            with pytest.raises(SandboxQuotaExceeded):
                await pool.get(first)
            assert pool.state(first).status == "hibernated"
        # One command ended: its sandbox is idle again and makes room.
        await pool.get(first)
        assert pool.state(second).status == "hibernated"
        assert pool.state(third).status == "ready"
