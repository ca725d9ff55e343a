"""The model context keeps a turn's thinking blocks as journaled: signatures and redacted
data come back unchanged from a real journal (a SQLite file), as after a restart."""

from __future__ import annotations

from pathlib import Path

from burrow.llm.base import ThinkingBlock
from burrow.runs.journal import events as ev
from burrow.runs.journal.journal import Journal
from burrow.runs.loop.context import ModelContext, thinking_blocks_data
from burrow.store.accounts import AccountStore
from burrow.store.conversations import ConversationStore
from burrow.store.events import EventStore
from burrow.store.migrate import open_database

BLOCKS = [
    ThinkingBlock("Check the tests first.", "EqoBCkgIARABGAIiQL+sig/with+slashes=="),
    ThinkingBlock(redacted="EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"),
]


async def test_thinking_blocks_survive_the_journal(tmp_path: Path) -> None:
    db = await open_database(f"sqlite+aiosqlite:///{tmp_path / 'c.db'}")
    try:
        user = await AccountStore(db).get_or_create("alice")
        cid = (await ConversationStore(db).create(user.id, "t")).id
        journal = Journal(EventStore(db))
        await journal.append(
            cid,
            ev.make(ev.UserMessage(content="run the tests", steering=False), "r1"),
            ev.make(
                ev.AssistantMessage(
                    content="",
                    thinking="Check the tests first.",
                    tool_calls=[
                        ev.ToolCall(id="toolu_1", name="bash", arguments={"command": "pytest"})
                    ],
                    thinking_blocks=thinking_blocks_data(BLOCKS),
                ),
                "r1",
            ),
        )
        context = ModelContext()
        for event in await journal.read(cid):
            context.apply(event)
    finally:
        await db.close()
    assistant = context.messages[1]
    assert assistant.thinking_blocks == tuple(BLOCKS)
    assert assistant.tool_calls[0].arguments == '{"command": "pytest"}'


def test_a_turn_without_thinking_blocks_journals_no_field() -> None:
    message = ev.AssistantMessage(
        content="hi", thinking="", tool_calls=[], thinking_blocks=thinking_blocks_data([])
    )
    assert "thinking_blocks" not in ev.make(message, "r1").data
