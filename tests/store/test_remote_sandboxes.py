"""The remote sandbox ids the e2b backend keeps, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio

from burrow.store.database import Database
from burrow.store.remote_sandboxes import RemoteSandboxStore


async def test_one_remote_id_per_sandbox_replaced_and_forgotten(engine: Database) -> None:
    store, replica = RemoteSandboxStore(engine), RemoteSandboxStore(engine)
    assert await store.get("conv-1") is None
    await store.put("conv-1", "host1-iabc")
    assert await replica.get("conv-1") == "host1-iabc"  # another replica reads the same row
    await store.put("conv-1", "host2-idef")  # a fresh remote sandbox replaced a gone one
    assert await replica.get("conv-1") == "host2-idef"
    await asyncio.gather(*(store.put(f"conv-{i}", f"r{i}") for i in range(2, 12)))
    assert [await replica.get(f"conv-{i}") for i in range(2, 12)] == [f"r{i}" for i in range(2, 12)]
    await replica.forget("conv-1")
    await replica.forget("conv-1")  # twice: nothing to forget, no error
    assert await store.get("conv-1") is None
    assert await store.get("conv-2") == "r2"
