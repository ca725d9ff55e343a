"""Search across conversations, on SQLite and PostgreSQL: what is found, what is not."""

from __future__ import annotations

from burrow.runs.journal.journal import projection_change
from burrow.store.accounts import AccountStore
from burrow.store.conversations import ConversationStore
from burrow.store.database import Database
from burrow.store.events import EventStore
from burrow.store.records import NewEvent
from burrow.store.search import ConversationSearch, like_pattern, snippet


async def _conversation(engine: Database, owner: str, title: str, *events: NewEvent) -> str:
    user = await AccountStore(engine).get_or_create(owner)
    cid = (await ConversationStore(engine).create(user.id, title)).id
    if events:
        await EventStore(engine).append(cid, list(events), projection_change(list(events)))
    return cid


def _said(content: str) -> NewEvent:
    return NewEvent("user.message", {"content": content, "steering": False})


def _answered(content: str, thinking: str = "", arguments: str = "{}") -> NewEvent:
    calls = [{"id": "c1", "name": "bash", "arguments": arguments}]
    return NewEvent(
        "assistant.message", {"content": content, "thinking": thinking, "tool_calls": calls}
    )


async def _owner_id(engine: Database, name: str) -> str:
    return (await AccountStore(engine).get_or_create(name)).id


async def test_titles_and_message_text_of_the_owner_are_found(engine: Database) -> None:
    cid = await _conversation(
        engine,
        "alice",
        "Flask todo app",
        _said("Build a todo app with Flask"),
        _answered("I wrote app.py with a Todo model."),
        _answered("", thinking="secret plan about Todo", arguments='{"command": "todo"}'),
    )
    search = ConversationSearch(engine)
    hits = await search.search(await _owner_id(engine, "alice"), "TODO", 20)
    assert [(h.kind, h.seq) for h in hits] == [("title", None), ("assistant", 2), ("user", 1)]
    assert {h.conversation_id for h in hits} == {cid}
    assert hits[1].snippet == "I wrote app.py with a Todo model."  # not thinking, not calls


async def test_another_users_conversations_are_never_found(engine: Database) -> None:
    await _conversation(engine, "bob", "bob's payroll", _said("payroll numbers for bob"))
    alice = await _owner_id(engine, "alice")
    assert await ConversationSearch(engine).search(alice, "payroll", 20) == []


async def test_wildcards_and_json_spelling_are_matched_literally(engine: Database) -> None:
    await _conversation(
        engine,
        "alice",
        "t",
        _said("coverage is 100% now"),
        _said("use snake_case names"),
        _said('say "hi" \\ there\nnext line'),
        _said("100 percent, snakeXcase"),
    )
    alice = await _owner_id(engine, "alice")
    search = ConversationSearch(engine)
    assert [h.seq for h in await search.search(alice, "100%", 20)] == [1]
    assert [h.seq for h in await search.search(alice, "snake_case", 20)] == [2]
    assert [h.seq for h in await search.search(alice, '"hi" \\ there', 20)] == [3]
    assert await search.search(alice, "%", 20) != []  # a literal percent sign is there
    assert await search.search(alice, "_%_", 20) == []


async def test_results_are_bounded(engine: Database) -> None:
    await _conversation(engine, "alice", "many", *[_said(f"needle {i}") for i in range(40)])
    hits = await ConversationSearch(engine).search(await _owner_id(engine, "alice"), "needle", 7)
    assert len(hits) == 7
    assert [h.seq for h in hits] == list(range(40, 33, -1))  # newest first


def test_like_pattern_escapes_its_wildcards_and_escape() -> None:
    assert like_pattern("a%b_c\\d") == "%a\\%b\\_c\\\\d%"


def test_a_snippet_is_one_line_around_the_match() -> None:
    text = "x" * 300 + " the needle\nis here " + "y" * 300
    cut = snippet(text, text.index("needle"), 6)
    assert "needle is here" in cut and cut.startswith("…") and cut.endswith("…")
    assert len(cut) < 200
