"""The journal: commit then publish in order; follow gives history then live, exactly once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from burrow.runs.journal import journal as journal_module
from burrow.runs.journal.journal import Journal
from burrow.store.accounts import AccountStore
from burrow.store.conversations import ConversationStore
from burrow.store.events import EventStore
from burrow.store.migrate import open_database
from burrow.store.records import Event, NewEvent


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


async def test_a_reader_lagging_by_bytes_catches_up_in_bounded_pages(
    journal_and_cid: tuple[Journal, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_module, "SUBSCRIBER_BUFFER_CHARS", 50_000)
    monkeypatch.setattr(journal_module, "PAGE_BYTES", 100_000)
    journal, cid = journal_and_cid
    bulky = [NewEvent("tool.output", {"text": f"{i}" + "x" * 20_000}) for i in range(30)]
    await journal.append(cid, *bulky[:10])  # history: 200 KB, read in pages of 100 KB
    stream = journal.follow(cid, heartbeat=0.05)
    batches = [await anext(stream) for _ in range(2)]
    assert [len(b) for b in batches] == [4, 4]
    with journal.subscribe(cid) as watcher:
        for event in bulky[10:]:  # 400 KB live while the stream's reader is not reading
            await journal.append(cid, event)
        assert watcher.lagged  # bytes, not the 2,048-event count, made it lag
    seqs = [e.seq for b in batches for e in b]
    while len(seqs) < 30:
        batch = await asyncio.wait_for(anext(stream), 2)
        assert sum(len(e.data_json) for e in batch) <= 100_000 + 20_100
        seqs.extend(e.seq for e in batch)
    await stream.aclose()
    assert seqs == list(range(1, 31))


async def test_direct_writes_and_yielded_batches_together_deliver_each_event_once_in_order(
    journal_and_cid: tuple[Journal, str],
) -> None:
    journal, cid = journal_and_cid
    for i in range(3):
        await journal.append(cid, _note(i))  # history: yielded, never written directly
    delivered: list[int] = []
    full = asyncio.Event()  # set: the client's socket is full, `direct` writes nothing

    def direct(batch: Sequence[Event]) -> bool:
        if full.is_set():
            return False
        delivered.extend(e.seq for e in batch)
        return True

    async def reader() -> None:
        async for batch in journal.follow(cid, heartbeat=5, direct=direct):
            delivered.extend(e.seq for e in batch)
            if delivered and delivered[-1] == 40:
                return

    task = asyncio.create_task(reader())
    await asyncio.sleep(0.05)
    for i in range(37):
        if i % 10 == 5:
            full.set()  # the next events fall back to the reader's task...
        elif i % 10 == 8:
            full.clear()  # ...until it has written them and waits again
        await journal.append(cid, _note(i))
    await asyncio.wait_for(task, 5)
    assert delivered == list(range(1, 41))
