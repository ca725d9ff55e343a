"""The coalescer merges small pieces into few events, each of bounded size."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from burrow.runs.journal.coalesce import MAX_EVENT_CHARS, Coalescer
from burrow.runs.journal.events import ToolOutput
from burrow.runs.journal.journal import Journal
from burrow.store.accounts import AccountStore
from burrow.store.conversations import ConversationStore
from burrow.store.events import EventStore
from burrow.store.migrate import open_database


@pytest.fixture
async def journal_and_cid(tmp_path: Path) -> AsyncIterator[tuple[Journal, str]]:
    engine = await open_database(f"sqlite+aiosqlite:///{tmp_path / 'c.db'}")
    user = await AccountStore(engine).get_or_create("alice")
    cid = (await ConversationStore(engine).create(user.id, "t")).id
    yield Journal(EventStore(engine)), cid
    await engine.close()


async def test_merged_text_is_split_into_events_of_bounded_size(
    journal_and_cid: tuple[Journal, str],
) -> None:
    journal, cid = journal_and_cid
    coalescer = Coalescer(journal, cid, "r_1", window=60)
    pieces = [f"{i:05d}" * 2000 for i in range(30)]  # 10,000 characters each
    for piece in pieces:
        coalescer.add(ToolOutput(call_id="c", stream="stdout", text=piece))
    coalescer.add(ToolOutput(call_id="c", stream="stderr", text="err"))
    await coalescer.flush()
    events = await journal.read(cid)
    texts = [e.data["text"] for e in events]
    assert all(len(t) <= MAX_EVENT_CHARS for t in texts)
    assert [len(t) for t in texts] == [MAX_EVENT_CHARS] * 4 + [300_000 - 4 * MAX_EVENT_CHARS, 3]
    assert "".join(texts[:-1]) == "".join(pieces)  # nothing lost, nothing reordered
    assert events[-1].data["stream"] == "stderr"
