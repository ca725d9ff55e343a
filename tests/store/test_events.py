"""The journal's storage: gap-free numbering, projection of the conversation row, reads."""

from __future__ import annotations

import asyncio
import json

import pytest

from burrow.runs.journal.journal import projection_change
from burrow.store.accounts import AccountStore
from burrow.store.conversations import ConversationStore
from burrow.store.database import Database
from burrow.store.events import ConversationGone, EventStore
from burrow.store.records import NewEvent


async def _conversation(engine: Database) -> str:
    user = await AccountStore(engine).get_or_create("alice")
    return (await ConversationStore(engine).create(user.id, "t")).id


async def test_concurrent_appends_get_unique_gap_free_seqs(engine: Database) -> None:
    cid = await _conversation(engine)
    store = EventStore(engine)

    async def writer(n: int) -> None:
        for i in range(10):
            batch = [NewEvent("tool.output", {"w": n, "i": i, "j": j}) for j in range(3)]
            await store.append(cid, batch, projection_change(batch))

    await asyncio.gather(*(writer(n) for n in range(8)))
    seqs = [e.seq for e in await store.read(cid)]
    assert seqs == list(range(1, 8 * 10 * 3 + 1))
    conversation = await ConversationStore(engine).get(cid)
    assert conversation is not None and conversation.last_seq == 240


async def test_read_after_and_limit_and_data_round_trip(engine: Database) -> None:
    cid = await _conversation(engine)
    store = EventStore(engine)
    batch = [
        NewEvent("user.message", {"content": f"héllo {i} \u2603", "steering": False})
        for i in range(5)
    ]
    await store.append(cid, batch, projection_change(batch))
    page = await store.read(cid, after=2, limit=2)
    assert [e.seq for e in page] == [3, 4]
    assert page[0].data == {"content": "héllo 2 \u2603", "steering": False}
    assert json.loads(page[0].envelope_json())["data"] == page[0].data


async def test_projection_tracks_status_and_usage(engine: Database) -> None:
    cid = await _conversation(engine)
    store, conversations = EventStore(engine), ConversationStore(engine)
    started = [NewEvent("run.started", {"run_id": "r"}, "r")]
    await store.append(cid, started, projection_change(started))
    assert (await conversations.get(cid)).status == "running"  # type: ignore[union-attr]
    usage = [
        NewEvent("usage", {"prompt_tokens": 10, "completion_tokens": 5, "cost": 0.5}, "r"),
        NewEvent("usage", {"prompt_tokens": 1, "completion_tokens": 2, "cost": 0.25}, "r"),
        NewEvent("sandbox.status", {"status": "ready", "detail": ""}),
        NewEvent("run.finished", {"status": "completed", "error": None, "usage": {}}, "r"),
    ]
    await store.append(cid, usage, projection_change(usage))
    after = await conversations.get(cid)
    assert after is not None
    assert (after.status, after.sandbox_status) == ("idle", "ready")
    assert (after.usage.prompt_tokens, after.usage.completion_tokens, after.usage.cost) == (
        11,
        7,
        0.75,
    )


async def test_append_to_deleted_conversation_fails_clearly(engine: Database) -> None:
    cid = await _conversation(engine)
    await ConversationStore(engine).delete(cid)
    with pytest.raises(ConversationGone):
        await EventStore(engine).append(cid, [NewEvent("x", {})], projection_change([]))


async def test_ownership_filter(engine: Database) -> None:
    users, conversations = AccountStore(engine), ConversationStore(engine)
    alice, bob = await users.get_or_create("alice"), await users.get_or_create("bob")
    mine = await conversations.create(alice.id, "mine")
    assert await conversations.get(mine.id, owner_id=bob.id) is None
    assert (await conversations.get(mine.id, owner_id=alice.id)) == mine
    assert [c.id for c in await conversations.owned_by(bob.id)] == []


async def test_a_byte_bounded_read_pages_losslessly_and_never_stalls(engine: Database) -> None:
    cid = await _conversation(engine)
    store = EventStore(engine)
    texts = ["é" * 30_000, "x" * 10, "y" * 200_000, "z" * 10, "w" * 10]  # "é": 2 bytes each
    batch = [NewEvent("tool.output", {"text": t}) for t in texts]
    await store.append(cid, batch, projection_change(batch))
    pages, after = [], 0
    while page := await store.read(cid, after, limit=100, max_bytes=50_000):
        pages.append([e.seq for e in page])
        after = page[-1].seq
    # 60 KB of "é" fill the first page (bytes, not 30,000 characters); the 200 KB event exceeds
    # any page on its own and still comes, alone.
    assert pages == [[1], [2], [3], [4, 5]]
    assert [e.seq for e in await store.read(cid, 0, limit=2, max_bytes=10**9)] == [1, 2]


async def test_last_of_finds_each_conversations_latest_event_of_the_types(
    engine: Database,
) -> None:
    store = EventStore(engine)
    first, second, empty = [await _conversation(engine) for _ in range(3)]
    for cid, kinds in ((first, ["usage", "x", "compacted", "x"]), (second, ["usage", "x"])):
        batch = [NewEvent(type=kind, data={"n": i}) for i, kind in enumerate(kinds)]
        await store.append(cid, batch, projection_change(batch))
    found = await store.last_of([first, second, empty], ["usage", "compacted"])
    assert {cid: (e.seq, e.type, e.data) for cid, e in found.items()} == {
        first: (3, "compacted", {"n": 2}),
        second: (1, "usage", {"n": 0}),
    }
