"""The scripted model for a whole suite: routed by each conversation's first message, and
continuing its script after a compaction folded earlier turns away."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from burrow.llm.base import Message, ModelError, TextDelta, ToolCall, ToolCallDelta
from burrow.llm.scripted import RoutedScripts, ScriptedProvider, load_provider
from burrow.runs.loop.context import summary_message


async def answer(provider: ScriptedProvider | RoutedScripts, messages: list[Message]) -> str:
    parts = []
    async for item in provider.stream(messages, []):
        if isinstance(item, TextDelta):
            parts.append(item.text)
        elif isinstance(item, ToolCallDelta) and item.name:
            parts.append(f"<{item.name} {item.id}>")
    return "".join(parts)


def script_file(tmp_path: Path) -> Path:
    path = tmp_path / "suite.json"
    conversations = [
        {"prompt": "first task", "turns": [{"text": "one-a"}, {"text": "one-b"}]},
        {"prompt": "second task", "turns": [{"text": "two-a"}], "summary": "two so far"},
    ]
    path.write_text(json.dumps({"conversations": conversations}))
    return path


async def test_each_conversation_gets_its_own_script(tmp_path: Path) -> None:
    provider = load_provider(script_file(tmp_path))
    assert isinstance(provider, RoutedScripts)
    first = [Message(role="user", content="first task")]
    assert await answer(provider, first) == "one-a"
    second = [Message(role="user", content="second task")]
    assert await answer(provider, second) == "two-a"
    later = [*first, Message(role="assistant", content="one-a"), Message(role="user", content="go")]
    assert await answer(provider, later) == "one-b"
    # A compaction's summary call quotes the prompt inside its transcript.
    transcript = [Message(role="user", content="[user] second task\n[assistant] two-a")]
    assert await answer(provider, transcript) == "two so far"


async def test_an_unknown_conversation_is_an_error_not_a_guess(tmp_path: Path) -> None:
    provider = load_provider(script_file(tmp_path))
    with pytest.raises(ModelError, match="No script begins"):
        await answer(provider, [Message(role="user", content="something else")])


async def test_the_script_continues_after_a_compaction(tmp_path: Path) -> None:
    """Turn 3's tool call carries its number; after a compaction left only a summary and
    that call, the next answer is turn 4, not a replay from turn 1."""
    turns = [{"tool_calls": [{"name": "bash", "arguments": {"command": str(i)}}]} for i in range(4)]
    turns.append({"text": "finished"})
    path = tmp_path / "long.json"
    path.write_text(json.dumps(turns))
    provider = load_provider(path)
    history = [Message(role="user", content="go")]
    for expected in range(4):
        said = await answer(provider, history)
        call_id = said.split()[1].rstrip(">")
        assert f"_t{expected}_" in call_id
        history += [
            Message(role="assistant", tool_calls=(ToolCall(call_id, "bash", "{}"),)),
            Message(role="tool", content="ok", tool_call_id=call_id, name="bash"),
        ]
        if expected == 2:  # compacted: the older turns become a summary
            history = [history[0], summary_message("earlier work"), *history[-2:]]
    assert await answer(provider, history) == "finished"
