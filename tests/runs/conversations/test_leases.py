"""Run leases as a unit (runs/conversations/leases.py): what this replica holds, what it
fences the journal with, and what it gives back. The lease rows are an in-memory stand-in
for store/leases.py, whose own tests run on PostgreSQL (tests/replicas)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from burrow.runs.conversations.leases import RunElsewhere, RunLeases
from burrow.runs.journal.journal import Journal
from burrow.store.events import EventStore
from burrow.store.leases import Claim
from burrow.store.migrate import open_database


class Rows:
    """Lease rows: conversation -> holder, and which of them lapsed."""

    def __init__(self, replica: str) -> None:
        self.replica = replica
        self.holders: dict[str, str] = {}
        self.lapsed: set[str] = set()
        self.released: list[str] = []
        self.gate: asyncio.Event | None = None  # holds `acquire` until set

    async def acquire(self, cid: str) -> Claim:
        if self.gate is not None:
            await self.gate.wait()
        holder = self.holders.get(cid)
        if holder not in (None, self.replica) and cid not in self.lapsed:
            return Claim(holder=holder, took_over=False)
        self.holders[cid] = self.replica
        return Claim(holder=None, took_over=holder is not None and cid in self.lapsed)

    async def release(self, cid: str) -> None:
        self.released.append(cid)
        self.holders.pop(cid, None)

    async def holder(self, cid: str) -> str | None:
        return self.holders.get(cid)


@pytest.fixture
async def journal(tmp_path: Path) -> Journal:
    db = await open_database(f"sqlite+aiosqlite:///{tmp_path / 'burrow.db'}")
    return Journal(EventStore(db))


async def test_a_free_lease_is_taken_held_and_fences_the_journal(journal: Journal) -> None:
    rows = Rows("r1")
    leases = RunLeases(rows, journal)
    assert await leases.take("c1") is False  # nobody's run to repair
    assert leases.held() == {"c1"}
    assert journal.fence("c1") == "r1"
    assert journal.fence("c2") is None  # not ours: unfenced
    await leases.give_back("c1")
    assert (leases.held(), rows.released, journal.fence("c1")) == (set(), ["c1"], None)


async def test_another_replicas_lease_is_refused_and_not_held(journal: Journal) -> None:
    rows = Rows("r1")
    rows.holders["c1"] = "r2"
    leases = RunLeases(rows, journal)
    with pytest.raises(RunElsewhere) as refused:
        await leases.take("c1")
    assert refused.value.holder == "r2"
    assert leases.held() == set()
    assert await leases.take_if_free("c1") is False
    assert await leases.holder("c1") == "r2"


async def test_a_lapsed_lease_comes_with_the_run_to_repair(journal: Journal) -> None:
    rows = Rows("r1")
    rows.holders["c1"] = "r2"
    rows.lapsed.add("c1")
    leases = RunLeases(rows, journal)
    assert await leases.take("c1") is True
    assert leases.held() == {"c1"}


async def test_a_lease_being_taken_is_counted_before_its_row_exists(journal: Journal) -> None:
    """The upkeep must not release a row whose run is starting (held(taking=True))."""
    rows = Rows("r1")
    rows.gate = asyncio.Event()
    leases = RunLeases(rows, journal)
    taking = asyncio.create_task(leases.take("c1"))
    await asyncio.sleep(0)
    assert (leases.held(), leases.held(taking=True)) == (set(), {"c1"})
    rows.gate.set()
    await taking
    assert leases.held(taking=True) == leases.held() == {"c1"}


async def test_a_lost_lease_is_dropped_without_releasing_the_new_holders_row(
    journal: Journal,
) -> None:
    rows = Rows("r1")
    leases = RunLeases(rows, journal)
    await leases.take("c1")
    rows.holders["c1"] = "r2"  # taken over while this replica stalled
    leases.lost("c1")
    await leases.give_back("c1")  # the run's end: nothing of ours to give back
    assert (rows.released, rows.holders["c1"]) == ([], "r2")


async def test_one_process_holds_nothing_and_never_fences(journal: Journal) -> None:
    leases = RunLeases(None, journal)
    assert await leases.take("c1") is False
    assert await leases.take_if_free("c1") is True
    leases.claimed("c1")
    assert leases.held() == set()
    assert journal.fence("c1") is None
    assert await leases.holder("c1") is None
