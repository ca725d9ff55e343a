"""Cross-replica fan-out: two journals on one database, as two replicas are. What one
commits reaches the other's followers from notices alone — in order, once each, whatever
order, repetition or gaps the notices come with, interleaved with the follower side's own
commits."""

from __future__ import annotations

import asyncio

from burrow.runs.journal.fanout import CrossReplicaFeed
from burrow.runs.journal.journal import Journal
from burrow.store.accounts import AccountStore
from burrow.store.conversations import ConversationStore
from burrow.store.database import Database
from burrow.store.events import EventStore
from burrow.store.records import Event, NewEvent


def _note(text: str) -> NewEvent:
    return NewEvent("tool.output", {"call_id": "c", "stream": "stdout", "text": text})


async def _follow(journal: Journal, cid: str, until: int, into: list[int]) -> None:
    async for batch in journal.follow(cid, heartbeat=30):
        into += [e.seq for e in batch]
        if into and into[-1] >= until:
            return


def _notice(events: list[Event], replica: str = "a") -> str:
    return f"{events[0].conversation_id} {events[0].seq} {events[-1].seq} {replica}"


async def test_notices_in_any_order_give_followers_every_event_once(engine: Database) -> None:
    user = await AccountStore(engine).get_or_create("alice")
    cid = (await ConversationStore(engine).create(user.id, "t")).id
    a = Journal(EventStore(engine, announce_as="a"), shared=True)
    b = Journal(EventStore(engine, announce_as="b"), shared=True)
    feed = CrossReplicaFeed(b, "b")
    seen: list[int] = []
    follower = asyncio.create_task(_follow(b, cid, 40, seen))
    await asyncio.sleep(0.05)

    notices = []
    for i in range(0, 30, 3):
        notices.append(_notice(await a.append(cid, _note(f"{i}"), _note("x"), _note("y"))))
    feed.notified(notices[1])  # out of order: the gap before it heals from the store
    feed.notified(notices[0])
    feed.notified(notices[1])  # twice
    await b.append(cid, _note("b's own"))  # B's commit, between A's
    feed.notified(notices[0].replace(" a", " b"))  # B's own notice: ignored
    for notice in reversed(notices):
        feed.notified(notice)
    for i in range(9):
        feed.notified(_notice(await a.append(cid, _note(f"late {i}"))))
    feed.notified(f"{cid} 1000 1001 a")  # a notice of seqs that do not exist: nothing
    await asyncio.wait_for(follower, 10)
    assert seen == list(range(1, 41))
    await feed.close()


async def test_notices_for_conversations_nobody_follows_cost_no_read(engine: Database) -> None:
    user = await AccountStore(engine).get_or_create("alice")
    cid = (await ConversationStore(engine).create(user.id, "t")).id
    b = Journal(EventStore(engine), shared=True)
    feed = CrossReplicaFeed(b, "b")
    for i in range(10_000):
        feed.notified(f"c_{i} 1 1 a")
    feed.notified(f"{cid} 1 1 a")
    assert not feed._readers  # nothing scheduled: nobody here follows any of them
