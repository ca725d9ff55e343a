"""The journal: commit then publish in order; follow gives history then live, exactly once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from burrow.runs import journal as journal_module
from burrow.runs.journal import Journal
from burrow.store.accounts import AccountStore
from burrow.store.conversations import ConversationStore
from burrow.store.database import open_database
from burrow.store.events import EventStore
from burrow.store.records import NewEvent


@pytest.fixture
async def journal_and_cid(tmp_path: Path) -> AsyncIterator[tuple[Journal, str]]:
    engine = await open_database(f"sqlite+aiosqlite:///{tmp_path / 'j.db'}")
    user = await AccountStore(engine).get_or_create("alice")
    cid = (await ConversationStore(engine).create(user.id, "t")).id
    yield Journal(EventStore(engine)), cid
    await engine.close()


def _note(i: int) -> NewEvent:
    return NewEvent("tool.output", {"call_id": "c", "stream": "stdout", "text": str(i)})


async def test_concurrent_appends_are_published_in_seq_order(
    journal_and_cid: tuple[Journal, str],
) -> None:
    journal, cid = journal_and_cid
    with journal.subscribe(cid) as sub:
        results = await asyncio.gather(*(journal.append(cid, _note(i)) for i in range(200)))
        assert sorted(r[0].seq for r in results) == list(range(1, 201))
        pushed = [e.seq for e in sub.drain()]
    assert pushed == list(range(1, 201))


async def test_follow_gives_history_then_live_without_gap_or_duplicate(
    journal_and_cid: tuple[Journal, str],
) -> None:
    journal, cid = journal_and_cid
    for i in range(5):
        await journal.append(cid, _note(i))
    seen: list[int] = []

    async def reader() -> None:
        async for batch in journal.follow(cid, after=2, heartbeat=5):
            assert batch, "no heartbeat expected"
            seen.extend(e.seq for e in batch)
            if seen[-1] == 20:
                return

    task = asyncio.create_task(reader())
    for i in range(15):
        await journal.append(cid, _note(i))
    await asyncio.wait_for(task, 5)
    assert seen == list(range(3, 21))


async def test_follow_heartbeats_when_idle(journal_and_cid: tuple[Journal, str]) -> None:
    journal, cid = journal_and_cid
    stream = journal.follow(cid, heartbeat=0.05)
    assert await asyncio.wait_for(anext(stream), 2) == []
    await stream.aclose()


async def test_a_lagging_reader_catches_up_from_the_store(
    journal_and_cid: tuple[Journal, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_module, "SUBSCRIBER_BUFFER", 4)
    journal, cid = journal_and_cid
    stream = journal.follow(cid, heartbeat=0.05)
    assert await anext(stream) == []  # subscribed, idle
    for i in range(50):  # far more than the buffer holds, while the reader is not reading
        await journal.append(cid, _note(i))
    seqs: list[int] = []
    while len(seqs) < 50:
        seqs.extend(e.seq for e in await asyncio.wait_for(anext(stream), 2))
    await stream.aclose()
    assert seqs == list(range(1, 51))
