"""Compaction as the projection sees it: where the context may be split, and that a
context rebuilt from the journal (a real SQLite file) equals the one kept live."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from burrow.llm.base import Message, Pricing, ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from burrow.runs.journal import events as ev
from burrow.runs.journal.journal import Journal
from burrow.runs.loop.context import ModelContext
from burrow.runs.loop.hooks.compaction import (
    CompactionPolicy,
    NothingToCompact,
    choose_cut,
    compact,
)
from burrow.store.accounts import AccountStore
from burrow.store.conversations import ConversationStore
from burrow.store.events import EventStore
from burrow.store.migrate import open_database
from burrow.store.records import Event, NewEvent


@pytest.fixture
async def journal(tmp_path: Path) -> AsyncIterator[tuple[Journal, str]]:
    db = await open_database(f"sqlite+aiosqlite:///{tmp_path / 'c.db'}")
    user = await AccountStore(db).get_or_create("alice")
    cid = (await ConversationStore(db).create(user.id, "t")).id
    yield Journal(EventStore(db)), cid
    await db.close()


def user(text: str, steering: bool = False) -> NewEvent:
    return ev.make(ev.UserMessage(content=text, steering=steering), "r1")


def calls(*ids: str) -> NewEvent:
    made = [ev.ToolCall(id=i, name="bash", arguments={"command": f"echo {i}"}) for i in ids]
    return ev.make(ev.AssistantMessage(content="", thinking="", tool_calls=made), "r1")


def answer(text: str) -> NewEvent:
    return ev.make(ev.AssistantMessage(content=text, thinking="", tool_calls=[]), "r1")


def result(call_id: str, output: str = "out") -> NewEvent:
    return ev.make(ev.ToolFinished(call_id=call_id, output=output, is_error=False), "r1")


def paired(messages: list[Message]) -> bool:
    open_calls: set[str] = set()
    for m in messages:
        if m.role == "tool":
            if m.tool_call_id not in open_calls:
                return False
            open_calls.discard(m.tool_call_id)
        elif open_calls:
            return False
        elif m.role == "assistant":
            open_calls = {c.id for c in m.tool_calls}
    return not open_calls


async def projection(journal: Journal, cid: str) -> ModelContext:
    context = ModelContext()
    for event in await journal.read(cid):
        context.apply(event)
    return context


async def test_steering_deferred_past_tool_results_is_never_split_from_them(
    journal: tuple[Journal, str],
) -> None:
    log, cid = journal
    # The steering message (seq 3) is placed after both results (seqs 4, 5).
    await log.append(cid, user("start"), calls("a", "b"), user("also this", True))
    await log.append(cid, result("a"), result("b"), answer("done"), user("next"), answer("ok"))
    context = await projection(log, cid)
    assert [m.role for m in context.messages] == [
        "user", "assistant", "tool", "tool", "user", "assistant", "user", "assistant"
    ]  # fmt: skip
    assert context.cuts() == [1, 5, 6, 7]  # never inside the calls, nor before "also this"
    for cut in context.cuts():
        upto = max(context.origins[:cut])
        after = context.compacted(upto, "S", context.last_seq + 1)
        assert paired([m for m, _ in after]), cut


async def test_a_context_rebuilt_from_the_journal_equals_the_live_one(
    journal: tuple[Journal, str],
) -> None:
    log, cid = journal
    live = ModelContext()

    async def write(*batch: NewEvent) -> None:
        for event in await log.append(cid, *batch):
            live.apply(event)  # as the run's feed delivers them

    summarizer = ScriptedProvider([ScriptedTurn(text="first summary"), ScriptedTurn(text="second")])
    policy = CompactionPolicy(window=1_000, keep=0.05)
    await write(user("build it"), calls("a"), result("a", "x" * 800), answer("built"))
    await write(user("test it"), calls("b"), result("b", "y" * 800), answer("tested"))
    events, _ = await compact(live, summarizer, policy, Pricing(), overhead=50, run_id="r1")
    await write(*events)
    await write(user("ship it"), calls("c"), result("c", "z" * 800), answer("shipped"))
    events, _ = await compact(live, summarizer, policy, Pricing(), overhead=50, run_id="r1")
    await write(*events)
    await write(user("thanks"))

    rebuilt = await projection(log, cid)
    assert rebuilt.messages == live.messages
    assert rebuilt.origins == live.origins
    assert rebuilt.size(50) == live.size(50)
    users = [m.content for m in rebuilt.messages if m.role == "user"]
    # Every user message verbatim, in order, through two compactions; one summary, the last.
    assert [u for u in users if "summary" not in u and "second" not in u] == [
        "build it", "test it", "ship it", "thanks"
    ]  # fmt: skip
    assert sum("second" in u for u in users) == 1 and not any("first summary" in u for u in users)
    assert paired(rebuilt.messages)
    # The second summary call was shown the first summary.
    assert any("first summary" in m.content for m in summarizer.requests[1])


async def test_a_context_of_the_users_messages_only_has_nothing_to_compact(
    journal: tuple[Journal, str],
) -> None:
    log, cid = journal
    await log.append(cid, user("one"), answer("a"))
    context = await projection(log, cid)
    with pytest.raises(NothingToCompact):
        await compact(
            context,
            ScriptedProvider([]),
            CompactionPolicy(window=10),
            Pricing(),
            overhead=0,
            run_id=None,
        )


def context_of(*batch: NewEvent) -> ModelContext:
    context = ModelContext()
    for seq, new in enumerate(batch, 1):
        data = json.dumps(new.data)
        context.apply(Event("c", seq, new.type, "", new.run_id, data))
    return context


def test_the_cut_keeps_recent_turns_whole_and_splits_a_long_turn_only_between_calls() -> None:
    turn = [calls("a"), result("a", "x" * 400), answer("one done")]
    context = context_of(user("first"), *turn, user("second"), calls("b"), result("b"))
    # What follows the second user message fits in the keep share: the turn stays whole.
    assert context.messages[choose_cut(context, 200, 500)].content == "second"

    long_turn = [e for i in range(6) for e in (calls(f"c{i}"), result(f"c{i}", "y" * 400))]
    context = context_of(user("only one"), *long_turn, answer("all done"))
    cut = choose_cut(context, 250, 500)  # a call with its result is ~115 tokens: two fit
    kept = context.messages[cut:]
    assert kept[0].tool_calls[0].id == "c4" and len(kept) == 5 and paired(kept)
    # Asked to keep nothing, the latest turn still stays whole when it is not too big.
    context = context_of(user("first"), *turn, user("second"), calls("b"), result("b"))
    assert context.messages[choose_cut(context, 0, 500)].content == "second"
