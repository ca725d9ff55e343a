"""Cross-replica delivery: an event committed by replica A -> read by an SSE client
attached to replica B, against the same event read by a client attached to A itself
(same-replica delivery, the baseline, measured in the same run on the same events).
Issue 16: two replicas on one PostgreSQL, cross-replica p50 <= 20 ms; and 2 replicas x
200 SSE clients.

A runs in this process on a fresh PostgreSQL database (BURROW_TEST_PG's server), B is a
`burrow serve` child process on the same database. The clock starts when A's commit
returns (the bench wraps A's transaction, as bench/sse_latency.py does on SQLite) and
stops when a client has read the event's complete SSE frame. The clients are
bench/sse_latency.py's epoll client processes, one for A's clients and one for B's. One
event at a time: the next is committed once every client on both replicas has the last.
The path B adds: NOTIFY at A's commit -> PostgreSQL -> B's LISTEN connection -> B reads
the new rows -> B's subscribers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import asyncpg
from sqlalchemy.ext.asyncio import AsyncEngine

from bench.common import p50, pct, report, serve_in_process, spawn_serve, wait_healthy
from bench.sse_latency import Clients, latencies
from burrow.llm.scripted import ScriptedProvider
from burrow.runs.journal.events import ToolOutput, make
from burrow.store.database import Database

PG_ADMIN_DSN = os.environ.get("BURROW_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
WARMUP = 10


@contextlib.asynccontextmanager
async def fresh_database() -> AsyncIterator[str]:
    name = f"burrow_bench_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(PG_ADMIN_DSN, timeout=5)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        base = PG_ADMIN_DSN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://")
        yield f"{base}/{name}"
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def reachable() -> None:
    await (await asyncpg.connect(PG_ADMIN_DSN, timeout=5)).close()


def clock_commits(db: Database, stamps: list[int]) -> None:
    """Wrap the PostgreSQL transaction so `stamps` gets the time as each commit returns.
    Bench-only; mirrors Database.run's PostgreSQL path."""
    engine = db.engine
    assert isinstance(engine, AsyncEngine)  # PostgreSQL's

    async def run(fn: Callable[[Any], Any]) -> Any:
        async with engine.begin() as conn:
            result = await conn.run_sync(fn)
        stamps.append(time.perf_counter_ns())  # committed: the clock starts here
        return result

    db.run = run  # type: ignore[method-assign]


async def measure(count: int, samples: int) -> None:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        async with (
            fresh_database() as url,
            serve_in_process(
                tmp / "a",
                lambda: ScriptedProvider([]),
                connections=10,
                database_url=url,
                replica_id="bench-a",
            ) as (base_a, svc, client),
        ):
            env = {"BURROW_DATABASE_URL": url, "BURROW_REPLICA_ID": "bench-b"}
            env["BURROW_LOG_LEVEL"] = "ERROR"
            (tmp / "b").mkdir()
            replica_b, base_b = spawn_serve(tmp / "b", "demo", env=env)
            try:
                await asyncio.to_thread(wait_healthy, replica_b, base_b)
                stamps: list[int] = []
                cid = (await client.post("/api/conversations", json={})).json()["id"]
                cookie = client.cookies["burrow_session"]  # sessions are rows: B knows it
                path = f"/api/conversations/{cid}/events"
                port = {
                    name: int(base.rsplit(":", 1)[1])
                    for name, base in (("a", base_a), ("b", base_b))
                }
                same = await Clients.start(port["a"], path, count, cookie, tmp / "same.json")
                cross = await Clients.start(port["b"], path, count, cookie, tmp / "cross.json")
                clock_commits(svc.db, stamps)
                commits: dict[int, int] = {}
                for i in range(WARMUP + samples):
                    [event] = await svc.journal.append(
                        cid, make(ToolOutput(call_id="c", stream="stdout", text=f"{i}\n"))
                    )
                    if i >= WARMUP:
                        commits[event.seq] = stamps[-1]
                    await same.all_have(event.seq)
                    await cross.all_have(event.seq)
                same_ms = latencies(commits, await same.arrivals())
                cross_ms = latencies(commits, await cross.arrivals())
            finally:
                replica_b.kill()
                replica_b.wait()
    for name, ours, base, target in (
        ("p50", p50(cross_ms), p50(same_ms), "<= 20 ms (issue 16)"),
        ("p99", pct(cross_ms, 0.99), pct(same_ms, 0.99), "-"),
    ):
        report(
            f"cross-replica commit->client {name}, 2 replicas x {count} clients",
            ours,
            "ms",
            f"same-replica {name} (clients on the committing replica, same events)",
            base,
            target,
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, nargs="*", default=[1, 200])
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args()
    try:
        asyncio.run(reachable())
    except (OSError, asyncpg.PostgresError) as exc:
        print(f"replicas: skipped, no PostgreSQL at {PG_ADMIN_DSN} ({exc})")
        sys.exit(0)
    for n in args.clients:
        asyncio.run(measure(n, args.samples))
