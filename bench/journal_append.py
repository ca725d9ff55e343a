"""Journal throughput on SQLite, one conversation (DESIGN.md §7: >= 20,000 events/s).

Baseline: the same rows inserted with the stdlib sqlite3 module, one transaction per
batch, no numbering, no projection, no publishing.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import report
from burrow.runs.events import ToolOutput, make
from burrow.runs.journal import Journal
from burrow.store.accounts import AccountStore
from burrow.store.conversations import ConversationStore
from burrow.store.database import open_database
from burrow.store.events import EventStore
from burrow.store.records import NewEvent

N = 20_000


def event(i: int) -> NewEvent:
    # Built as the runtime builds it: a typed payload, checked, then made an event.
    return make(ToolOutput(call_id="call_1", stream="stdout", text=f"line {i}\n"))


def raw_sqlite(path: Path, batch: int) -> float:
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute(
        "CREATE TABLE e (cid TEXT, seq INTEGER, type TEXT, data TEXT, PRIMARY KEY (cid, seq))"
    )
    start = time.perf_counter()
    for first in range(0, N, batch):
        with db:
            db.executemany(
                "INSERT INTO e VALUES (?, ?, ?, ?)",
                [
                    ("c", i, "tool.output", json.dumps(event(i).data))
                    for i in range(first, first + batch)
                ],
            )
    elapsed = time.perf_counter() - start
    db.close()
    return N / elapsed


async def journal_rate(path: Path, producers: int, batch: int) -> float:
    engine = await open_database(f"sqlite+aiosqlite:///{path}")
    user = await AccountStore(engine).get_or_create("bench")
    cid = (await ConversationStore(engine).create(user.id, "bench")).id
    journal = Journal(EventStore(engine))
    per_producer = N // producers

    async def produce(p: int) -> None:
        for first in range(0, per_producer, batch):
            await journal.append(cid, *(event(p * per_producer + first + j) for j in range(batch)))

    start = time.perf_counter()
    await asyncio.gather(*(produce(p) for p in range(producers)))
    elapsed = time.perf_counter() - start
    assert [e.seq for e in await journal.read(cid)] == list(range(1, N + 1))
    await engine.close()
    return N / elapsed


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        base1 = raw_sqlite(d / "raw1.db", 1)
        base50 = raw_sqlite(d / "raw50.db", 50)
        seq1 = await journal_rate(d / "j1.db", 1, 1)
        group = await journal_rate(d / "j2.db", 100, 1)
        batched = await journal_rate(d / "j3.db", 1, 50)
    report(
        "journal, 100 concurrent producers (group commit)",
        group,
        "ev/s",
        "raw sqlite3 txn/event",
        base1,
        ">= 20000 ev/s",
    )
    report(
        "journal, batches of 50 (coalesced output)",
        batched,
        "ev/s",
        "raw sqlite3 txn/50",
        base50,
        ">= 20000 ev/s",
    )
    report(
        "journal, one producer, one event per txn",
        seq1,
        "ev/s",
        "raw sqlite3 txn/event",
        base1,
        "(worst case)",
    )


if __name__ == "__main__":
    asyncio.run(main())
