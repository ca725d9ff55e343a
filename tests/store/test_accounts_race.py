"""Replicas that start at once on a fresh database (compose starts them together): each
ensures the admin, and neither start fails on the other's insert."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from burrow.store.accounts import AccountStore
from burrow.store.migrate import open_database
from tests.conftest import pg_database


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
async def test_concurrent_first_starts_create_one_admin_and_all_get_it(
    dialect: str, tmp_path: Path
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        if dialect == "sqlite":
            url = f"sqlite+aiosqlite:///{tmp_path / 'burrow.db'}"
        else:
            url = await stack.enter_async_context(pg_database())
        # A database each (its own engine and pool), as each replica has.
        databases = [await open_database(url) for _ in range(4)]
        for db in databases:
            stack.push_async_callback(db.close)
        stores = [AccountStore(db) for db in databases]
        for round_ in range(5):  # a few rounds: the race needs two SELECTs before an INSERT
            name = f"admin-{round_}"
            users = await asyncio.gather(*(s.get_or_create(name, is_admin=True) for s in stores))
            assert len({user.id for user in users}) == 1
            assert all(user.is_admin and user.username == name for user in users)
