"""Two real `burrow serve` replicas on one fresh PostgreSQL database, for the tests and
the bench: separate data directories (so separate local sandboxes), one database."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from tests.api.harness import ADMIN_PASSWORD, log_in, serve_process

LEASE_SECONDS = 3.0  # short, so a takeover test takes seconds
SECRET_KEY = base64.urlsafe_b64encode(b"replicas-share-one-secret-key-32").decode()


@dataclass
class Node:
    name: str
    process: subprocess.Popen[bytes]
    base: str


def script(path: Path, turns: list[dict[str, Any]]) -> str:
    """A `scripted:` model that plays `turns` (then says "(end of script)")."""
    path.write_text(json.dumps(turns))
    return f"scripted:{path}"


@contextlib.contextmanager
def replicas(
    tmp_path: Path, database_url: str, models: dict[str, str], **env: str
) -> Iterator[dict[str, Node]]:
    """One `burrow serve` per entry of `models` (name -> model), all on `database_url`."""
    with contextlib.ExitStack() as stack:
        nodes = {}
        for name, model in models.items():
            settings = {
                "BURROW_DATABASE_URL": database_url,
                "BURROW_REPLICA_ID": name,
                "BURROW_RUN_LEASE_SECONDS": str(LEASE_SECONDS),
                # Replicas share the key that seals stored secrets (docs/scale-out.md).
                "BURROW_SECRET_KEY": SECRET_KEY,
                **env,
            }
            data_dir = tmp_path / name
            data_dir.mkdir()
            process, base = stack.enter_context(serve_process(data_dir, model, settings))
            nodes[name] = Node(name, process, base)
        yield nodes


@contextlib.asynccontextmanager
async def client(node: Node, timeout: float = 30) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=node.base, timeout=timeout) as http:
        await log_in(http, "admin", ADMIN_PASSWORD)
        yield http


async def lease_holder(database_url: str, cid: str) -> str | None:
    """Who holds the conversation's run lease, read straight from the table."""
    conn = await asyncpg.connect(database_url.replace("postgresql+asyncpg", "postgresql"))
    try:
        holder: str | None = await conn.fetchval(
            "SELECT replica_id FROM run_leases WHERE conversation_id = $1", cid
        )
        return holder
    finally:
        await conn.close()


async def lease_released(database_url: str, cid: str, within: float = 5.0) -> bool:
    """Whether the conversation's lease row goes away within `within` seconds (a run gives
    it back just after its run.finished is committed)."""
    deadline = time.monotonic() + within
    while await lease_holder(database_url, cid) is not None:
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True
