"""Run leases on SQLite and PostgreSQL: one holder at a time, lapsed leases taken once."""

from __future__ import annotations

import asyncio

import pytest

from burrow.store.accounts import AccountStore
from burrow.store.commands import CommandStore
from burrow.store.conversations import ConversationStore
from burrow.store.database import Database
from burrow.store.events import ConversationGone, EventStore, LeaseLost
from burrow.store.leases import Claim, LeaseStore
from burrow.store.records import NewEvent, ProjectionChange


async def _conversation(engine: Database) -> str:
    user = await AccountStore(engine).get_or_create("alice")
    return (await ConversationStore(engine).create(user.id, "t")).id


async def test_one_holder_until_the_lease_lapses(engine: Database) -> None:
    cid = await _conversation(engine)
    a, b = LeaseStore(engine, "a", seconds=1.0), LeaseStore(engine, "b", seconds=1.0)
    assert await a.acquire(cid) == Claim(None)
    assert await b.acquire(cid) == Claim("a")
    assert await a.acquire(cid) == Claim(None, took_over=True)  # ours already (a restart)
    assert await a.renew() == {cid} and await b.renew() == set()
    assert await b.holder(cid) == "a"
    await asyncio.sleep(1.2)  # a stops renewing
    assert await b.holder(cid) is None
    assert await b.acquire(cid) == Claim(None, took_over=True)
    assert await a.renew() == set()  # a learns it lost the lease
    await a.release(cid)  # not a's any more: nothing happens
    assert await a.holder(cid) == "b"
    await b.release(cid)
    assert await a.holder(cid) is None


async def test_a_lapsed_lease_is_claimed_by_exactly_one_sweeper(engine: Database) -> None:
    cids = [await _conversation(engine) for _ in range(5)]
    dead = LeaseStore(engine, "dead", seconds=1.0)
    for cid in cids:
        await dead.acquire(cid)
    await asyncio.sleep(1.2)
    sweepers = [LeaseStore(engine, f"s{i}", seconds=30.0) for i in range(4)]
    claimed = await asyncio.gather(*(s.claim_lapsed() for s in sweepers))
    assert sorted(c for got in claimed for c in got) == sorted(cids)
    assert await sweepers[0].claim_lapsed() == []  # fresh now


async def test_racing_acquires_give_the_lease_to_one(engine: Database) -> None:
    cid = await _conversation(engine)
    stores = [LeaseStore(engine, f"r{i}") for i in range(8)]
    claims = await asyncio.gather(*(s.acquire(cid) for s in stores))
    winners = [s.replica for s, c in zip(stores, claims, strict=True) if c.holder is None]
    assert len(winners) == 1
    assert {c.holder for c in claims if c.holder is not None} == set(winners)


async def test_a_command_is_answered_once_or_withdrawn_once(engine: Database) -> None:
    cid = await _conversation(engine)
    asker, owner = CommandStore(engine, "a"), CommandStore(engine, "b")
    first = await asker.post(cid, "b", "interrupt", {})
    assert await asker.take(first) is None  # addressed to b, not a
    command = await owner.take(first)
    assert command is not None and command.kind == "interrupt" and command.origin == "a"
    assert await owner.pending() == [first]
    await owner.answer(command, {"run_id": None})
    assert await asker.withdraw(first) is False  # answered: cannot be taken back
    assert await asker.result(first) == {"run_id": None}
    second = await asker.post(cid, "b", "message", {"content": "hi"})
    assert await asker.withdraw(second) is True
    assert await owner.take(second) is None
    await asker.forget(first)
    assert await owner.pending() == []


async def test_appends_fenced_by_a_lease_stop_once_it_is_taken_over(engine: Database) -> None:
    cid = await _conversation(engine)
    events = EventStore(engine)
    a, b = LeaseStore(engine, "a", seconds=1.0), LeaseStore(engine, "b")
    note = [NewEvent("tool.output", {"text": "x"})]
    with pytest.raises(LeaseLost):  # no lease yet: a fenced append has nothing to hold
        await events.append(cid, note, ProjectionChange(), fence="a")
    await a.acquire(cid)
    [first] = await events.append(cid, note, ProjectionChange(), fence="a")
    await asyncio.sleep(1.2)
    assert (await b.acquire(cid)).took_over
    with pytest.raises(LeaseLost):
        await events.append(cid, note, ProjectionChange(), fence="a")
    [second] = await events.append(cid, note, ProjectionChange(), fence="b")
    assert second.seq == first.seq + 1  # the refused append took no seq
    await ConversationStore(engine).delete(cid)
    with pytest.raises(ConversationGone):
        await events.append(cid, note, ProjectionChange(), fence="b")
