"""A file saved in the editor reaches the model context as a note: at once between turns,
after the pending tool results when it was saved while tools ran (the chat format wants
results right after the calls)."""

from __future__ import annotations

import json

from burrow.runs.journal import events as ev
from burrow.runs.loop.context import ModelContext, file_saved_note
from burrow.store.records import Event


def journal(*payloads: ev.Payload) -> list[Event]:
    return [
        Event("c1", seq, p.type.value, "2026-11-30T00:00:00Z", None, json.dumps(p.to_data()))
        for seq, p in enumerate(payloads, start=1)
    ]


def roles(context: ModelContext) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in context.messages]


def test_a_save_between_turns_is_a_note_before_the_next_message() -> None:
    context = ModelContext()
    for event in journal(
        ev.UserMessage(content="hi", steering=False),
        ev.AssistantMessage(content="hello", thinking="", tool_calls=[]),
        ev.FileSaved(path="src/app.py", bytes=3),
        ev.UserMessage(content="go on", steering=False),
    ):
        context.apply(event)
    assert roles(context)[2:] == [("user", file_saved_note("src/app.py")), ("user", "go on")]
    assert context.user_messages == 2  # a note is not the user's message


def test_a_save_while_tools_run_comes_after_their_results() -> None:
    context = ModelContext()
    call = ev.ToolCall(id="call_1", name="bash", arguments={"command": "ls"})
    for event in journal(
        ev.UserMessage(content="list", steering=False),
        ev.AssistantMessage(content="", thinking="", tool_calls=[call]),
        ev.FileSaved(path="notes.md"),
        ev.ToolFinished(call_id="call_1", is_error=False, output="notes.md"),
    ):
        context.apply(event)
    assert [m.role for m in context.messages] == ["user", "assistant", "tool", "user"]
    assert context.messages[-1].content == file_saved_note("notes.md")
