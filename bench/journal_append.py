"""Journal throughput on SQLite, one conversation (DESIGN.md §7: >= 20,000 events/s).

Baseline: the same rows inserted with the stdlib sqlite3 module in transactions of the same
sizes the journal committed (group commit merges concurrent appends: the bench records the
size of each transaction it made and replays exactly those), no numbering, no projection,
no publishing.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import report
from burrow.runs.journal import Journal
from burrow.store.accounts import AccountStore
from burrow.store.conversations import ConversationStore
from burrow.store.database import open_database
from burrow.store.events import EventStore
from burrow.store.records import Event, NewEvent, ProjectionChange

N = 20_000


def event(i: int) -> NewEvent:
    return NewEvent("tool.output", {"call_id": "call_1", "stream": "stdout", "text": f"line {i}\n"})


def raw_sqlite(path: Path, sizes: list[int]) -> float:
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute(
        "CREATE TABLE e (cid TEXT, seq INTEGER, type TEXT, data TEXT, PRIMARY KEY (cid, seq))"
    )
    start = time.perf_counter()
    first = 0
    for size in sizes:
        with db:
            db.executemany(
                "INSERT INTO e VALUES (?, ?, ?, ?)",
                [
                    ("c", i, "tool.output", json.dumps(event(i).data))
                    for i in range(first, first + size)
                ],
            )
        first += size
    elapsed = time.perf_counter() - start
    db.close()
    return N / elapsed


class CountingStore(EventStore):
    """Records how many events each transaction held."""

    sizes: list[int]

    async def append(
        self, cid: str, batch: Sequence[NewEvent], change: ProjectionChange
    ) -> list[Event]:
        self.sizes.append(len(batch))
        return await super().append(cid, batch, change)


async def journal_rate(path: Path, producers: int, batch: int) -> tuple[float, list[int]]:
    engine = await open_database(f"sqlite+aiosqlite:///{path}")
    user = await AccountStore(engine).get_or_create("bench")
    cid = (await ConversationStore(engine).create(user.id, "bench")).id
    store = CountingStore(engine)
    store.sizes = []
    journal = Journal(store)
    per_producer = N // producers

    async def produce(p: int) -> None:
        for first in range(0, per_producer, batch):
            await journal.append(cid, *(event(p * per_producer + first + j) for j in range(batch)))

    start = time.perf_counter()
    await asyncio.gather(*(produce(p) for p in range(producers)))
    elapsed = time.perf_counter() - start
    assert [e.seq for e in await journal.read(cid)] == list(range(1, N + 1))
    await engine.close()
    return N / elapsed, store.sizes


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        seq1, sizes1 = await journal_rate(d / "j1.db", 1, 1)
        group, sizes_group = await journal_rate(d / "j2.db", 100, 1)
        batched, sizes50 = await journal_rate(d / "j3.db", 1, 50)
        base1 = raw_sqlite(d / "raw1.db", sizes1)
        base_group = raw_sqlite(d / "raw_group.db", sizes_group)
        base50 = raw_sqlite(d / "raw50.db", sizes50)
    mean_group = N / len(sizes_group)
    report(
        "journal, 100 concurrent producers (group commit)",
        group,
        "ev/s",
        f"raw sqlite3, same {len(sizes_group)} txns (mean {mean_group:.1f} events/txn)",
        base_group,
        ">= 20000 ev/s",
    )
    report(
        "journal, batches of 50 (coalesced output)",
        batched,
        "ev/s",
        "raw sqlite3, 50 events/txn",
        base50,
        ">= 20000 ev/s",
    )
    report(
        "journal, one producer, one event per txn",
        seq1,
        "ev/s",
        "raw sqlite3, 1 event/txn",
        base1,
        "(worst case)",
    )


if __name__ == "__main__":
    asyncio.run(main())
