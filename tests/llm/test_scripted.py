"""ScriptedProvider replays turns like a streaming server and records what it was asked."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

import pytest

from burrow.llm.base import (
    Done,
    Message,
    ModelError,
    ScriptedTurn,
    TextDelta,
    ThinkingDelta,
    ToolSpec,
)
from burrow.llm.scripted import ScriptedProvider, load_script
from tests.fakes import collect

HELLO = [Message(role="user", content="hello")]


async def test_streams_thinking_text_and_tool_calls_then_usage_and_done() -> None:
    turn = ScriptedTurn(
        thinking="I will look at the files first.",
        text="Let me list the workspace for you.",
        tool_calls=[("bash", {"command": "ls"}), ("read_file", {"path": "a.txt"})],
    )
    answer = await collect(ScriptedProvider([turn]).stream(HELLO, []))
    assert answer.thinking == turn.thinking
    assert answer.text == turn.text
    assert sum(isinstance(e, TextDelta) for e in answer.events) == 7  # one per word
    assert 1 < sum(isinstance(e, ThinkingDelta) for e in answer.events) <= 3
    assert [(c.name, json.loads(c.arguments)) for c in answer.tool_calls] == [
        ("bash", {"command": "ls"}),
        ("read_file", {"path": "a.txt"}),
    ]
    assert len({c.id for c in answer.tool_calls}) == 2
    assert answer.usage is not None and answer.usage.prompt_tokens > 0
    assert answer.usage.completion_tokens > 0
    assert answer.events[-1] == Done("tool_calls")


async def test_invalid_json_arguments_pass_through_verbatim() -> None:
    provider = ScriptedProvider([ScriptedTurn(tool_calls=[("bash", '{"command": "ls"')])])
    answer = await collect(provider.stream(HELLO, []))
    assert answer.tool_calls[0].arguments == '{"command": "ls"'


async def test_records_every_request_and_the_tools_offered() -> None:
    provider = ScriptedProvider([ScriptedTurn(text="one"), ScriptedTurn(text="two")])
    bash = ToolSpec("bash", "Run", {})
    first = await collect(provider.stream(HELLO, [bash]))
    follow_up = [
        *HELLO,
        Message(role="assistant", content="one"),
        Message(role="user", content="+"),
    ]
    second = await collect(provider.stream(follow_up, []))
    assert (first.text, second.text) == ("one", "two")
    assert provider.requests == [HELLO, follow_up]
    assert provider.tool_requests == [[bash], []]


async def test_exhausted_script_ends_politely() -> None:
    provider = ScriptedProvider([])
    answer = await collect(provider.stream(HELLO, []))
    assert answer.text == "(end of script)"
    assert answer.finish_reason == "stop"


async def test_turn_from_context_continues_where_the_conversation_is() -> None:
    turns = [ScriptedTurn(text="first"), ScriptedTurn(text="second")]
    history = [
        *HELLO,
        Message(role="assistant", content="first"),
        Message(role="user", content="?"),
    ]
    answer = await collect(ScriptedProvider(turns, turn_from_context=True).stream(history, []))
    assert answer.text == "second"  # a fresh provider, as after a restart


async def test_error_after_the_text() -> None:
    provider = ScriptedProvider([ScriptedTurn(text="Partial answer", error="Boom.")])
    seen = []
    with pytest.raises(ModelError, match=r"^Boom\.$") as caught:
        async for event in provider.stream(HELLO, []):
            seen.append(event)
    assert not caught.value.retryable
    assert seen == [TextDelta("Partial "), TextDelta("answer")]


async def test_delay_paces_the_stream_so_it_can_be_interrupted() -> None:
    provider = ScriptedProvider([ScriptedTurn(text="one two three four five", delay=0.05)])
    seen: list[object] = []

    async def consume() -> None:
        async for event in provider.stream(HELLO, []):
            seen.append(event)

    task = asyncio.create_task(consume())
    started = time.monotonic()
    await asyncio.sleep(0.12)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert 1 <= len(seen) <= 3
    assert time.monotonic() - started < 1


def test_load_script(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    script = [
        {"thinking": "hm", "text": "Writing.", "tool_calls": [{"name": "bash", "arguments": {}}]},
        {"tool_calls": [{"name": "bash", "arguments": "not json"}], "delay": 0.1},
        {"text": "Oops", "error": "Server fell over.", "error_retryable": True},
    ]
    path.write_text(json.dumps(script))
    assert load_script(path) == [
        ScriptedTurn(text="Writing.", thinking="hm", tool_calls=[("bash", {})]),
        ScriptedTurn(tool_calls=[("bash", "not json")], delay=0.1),
        ScriptedTurn(text="Oops", error="Server fell over.", error_retryable=True),
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "is not valid JSON"),
        ('{"text": "x"}', "must be a JSON list of turns"),
        ('[{"txt": "x"}]', "turn 1: unknown keys ['txt']"),
        ('[{"tool_calls": [{"arguments": {}}]}]', "turn 1: each tool call needs a string 'name'"),
    ],
)
def test_load_script_says_what_is_wrong(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "script.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=re.escape(message)):
        load_script(path)


def test_missing_script_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Cannot read the model script"):
        load_script(tmp_path / "nope.json")
