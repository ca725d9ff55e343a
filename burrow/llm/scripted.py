"""A model that replays a fixed script: for tests, evals and the offline demo."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from burrow.llm.base import (
    Done,
    Message,
    ModelError,
    ScriptedTurn,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
)

END_OF_SCRIPT = ScriptedTurn(text="(end of script)")


class ScriptedProvider:
    """Answers the n-th `stream` call with the n-th turn, then "(end of script)" forever.

    With `turn_from_context=True` the turn is chosen by how many assistant messages the
    conversation already holds instead, so a fresh provider (a new run, a restarted
    server) continues the script where the conversation left off.

    `subagents` scripts the `task` tool's subagents, which may run at once (so in no fixed
    order): a request whose first user message (a subagent's prompt) starts with one of
    its keys is answered from that key's turns, chosen by how many assistant messages the
    request holds; such requests do not advance the main script.
    """

    def __init__(
        self,
        turns: Sequence[ScriptedTurn],
        *,
        chunk_delay: float = 0.0,
        turn_from_context: bool = False,
        name: str = "scripted",
        subagents: Mapping[str, Sequence[ScriptedTurn]] | None = None,
    ) -> None:
        self.turns = list(turns)
        self.chunk_delay = chunk_delay
        self.turn_from_context = turn_from_context
        self.name = name
        self.subagents = {key: list(turns) for key, turns in (subagents or {}).items()}
        self.requests: list[list[Message]] = []  # the context of every call, in order
        self.tool_requests: list[list[ToolSpec]] = []  # the tools offered with each call
        self._main_calls = 0

    def _turn(self, messages: Sequence[Message]) -> tuple[ScriptedTurn, int]:
        """The turn that answers `messages`, and its number (marked in its tool calls' ids)."""
        answered = sum(1 for m in messages if m.role == "assistant")
        first = next((m.content for m in messages if m.role == "user"), None)
        for key, turns in self.subagents.items():
            if first is not None and first.startswith(key):
                return (turns[answered] if answered < len(turns) else END_OF_SCRIPT), answered
        index = turn_index(messages) if self.turn_from_context else self._main_calls
        self._main_calls += 1
        return (self.turns[index] if index < len(self.turns) else END_OF_SCRIPT), index

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        max_tokens: int | None = None,
    ) -> AsyncIterator[StreamEvent]:
        self.requests.append(list(messages))
        self.tool_requests.append(list(tools))
        turn, number = self._turn(messages)
        replay = play(turn, messages, chunk_delay=self.chunk_delay, number=number)
        async with contextlib.aclosing(replay) as events:
            async for event in events:
                yield event


class RoutedScripts:
    """Several scripts on one server, each answering the conversation that began with its
    prompt: how `burrow eval` runs a whole suite against one scripted server.

    The file is `{"conversations": [{"prompt", "turns": [...], "summary"?}]}`. A request
    whose first user message is no script's prompt but quotes one (a compaction's summary
    call sends the transcript) gets that script's `summary`; any other gets an error
    saying which prompts the file knows.
    """

    def __init__(self, scripts: dict[str, tuple[list[ScriptedTurn], str]]) -> None:
        self.scripts = scripts
        self.name = "scripted"

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        max_tokens: int | None = None,
    ) -> AsyncIterator[StreamEvent]:
        first = next((m.content for m in messages if m.role == "user"), "").strip()
        if first in self.scripts:
            turns, _ = self.scripts[first]
            index = turn_index(messages)
            turn = turns[index] if index < len(turns) else END_OF_SCRIPT
        else:
            quoted = [s for p, (_, s) in self.scripts.items() if p and p in first]
            if not quoted:
                raise ModelError(
                    f"No script begins with this conversation's first message ({first[:80]!r}); "
                    f"the file has {len(self.scripts)} prompts."
                )
            turn, index = ScriptedTurn(text=quoted[0]), 0
        async with contextlib.aclosing(play(turn, messages, number=index)) as events:
            async for event in events:
                yield event


_MARKED_CALL = re.compile(r"^call_[0-9a-f]+_t(\d+)_\d+$")


def turn_index(messages: Sequence[Message]) -> int:
    """Which turn of a script answers `messages`: one past the latest turn that left a mark
    in the context (its tool calls' ids carry their turn's number), else the number of
    assistant messages. The mark survives compaction, which folds older turns into a
    summary (a plain count would replay the script from there)."""
    count = sum(1 for m in messages if m.role == "assistant")
    for message in reversed(messages):
        for call in message.tool_calls if message.role == "assistant" else ():
            marked = _MARKED_CALL.match(call.id)
            if marked:
                return max(count, int(marked.group(1)) + 1)
    return count


def words(text: str) -> list[str]:
    """Word-sized chunks that join back to exactly `text`."""
    return re.findall(r"\s*\S+\s*", text) or ([text] if text else [])


def thirds(text: str) -> list[str]:
    """A few larger chunks: thinking streams, but it is not worth a chunk per word."""
    parts = words(text)
    size = max(1, -(-len(parts) // 3))
    return ["".join(parts[i : i + size]) for i in range(0, len(parts), size)]


def arguments_text(arguments: dict[str, Any] | str) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


async def play(
    turn: ScriptedTurn, messages: Sequence[Message], *, chunk_delay: float = 0.0, number: int = 0
) -> AsyncGenerator[StreamEvent, None]:
    """Stream one turn the way a real server would: thinking, text, tool calls, usage, done."""
    delay = turn.delay or chunk_delay

    async def paced(event: StreamEvent) -> StreamEvent:
        if delay > 0:
            await asyncio.sleep(delay)
        return event

    for part in thirds(turn.thinking):
        yield await paced(ThinkingDelta(part))
    for part in words(turn.text):
        yield await paced(TextDelta(part))
    if turn.error:
        if delay > 0:
            await asyncio.sleep(delay)
        raise ModelError(turn.error, retryable=turn.error_retryable)
    batch = secrets.token_hex(4)  # ids stay unique when a new provider replays a script
    produced = len(turn.thinking) + len(turn.text)
    for index, (name, arguments) in enumerate(turn.tool_calls):
        raw = arguments_text(arguments)
        produced += len(name) + len(raw)
        half = len(raw) // 2  # two fragments, as servers stream them
        call_id = f"call_{batch}_t{number}_{index}"  # the turn's number: see turn_index
        yield await paced(ToolCallDelta(index, id=call_id, name=name))
        yield await paced(ToolCallDelta(index, arguments=raw[:half]))
        yield await paced(ToolCallDelta(index, arguments=raw[half:]))
    prompt = sum(len(m.content) + len(m.thinking) for m in messages)
    prompt += sum(len(c.arguments) for m in messages for c in m.tool_calls)
    yield Usage(prompt_tokens=max(1, prompt // 4), completion_tokens=max(1, produced // 4))
    yield Done("tool_calls" if turn.tool_calls else "stop")


def load_script(path: str | Path) -> list[ScriptedTurn]:
    """The main turns of a script (see `read_script`)."""
    return read_script(path)[0]


def read_script(path: str | Path) -> tuple[list[ScriptedTurn], dict[str, list[ScriptedTurn]]]:
    """Read a script: a JSON list of turns {text, thinking, tool_calls: [{name, arguments}],
    delay, error, error_retryable}, every key optional; or `{"turns": [...], "subagents":
    {prompt prefix: [...]}}` to script subagents too (ScriptedProvider's `subagents`)."""
    return _script(_read(path), str(path))


def load_provider(path: str | Path) -> ScriptedProvider | RoutedScripts:
    """The provider a script file describes: one script (continued from the conversation's
    context; see `read_script`) or several routed by prompt (see RoutedScripts)."""
    data = _read(path)
    if not (isinstance(data, dict) and "conversations" in data):
        turns, subagents = _script(data, str(path))
        return ScriptedProvider(turns, turn_from_context=True, subagents=subagents)
    if not isinstance(data["conversations"], list):
        raise ValueError(f'The model script {path}: "conversations" must be a list')
    scripts: dict[str, tuple[list[ScriptedTurn], str]] = {}
    for i, item in enumerate(data["conversations"]):
        where = f"{path}, conversation {i + 1}"
        if not isinstance(item, dict) or not isinstance(item.get("prompt"), str):
            raise ValueError(f"{where}: needs a string 'prompt'")
        if not isinstance(item.get("turns"), list):
            raise ValueError(f"{where}: needs a list 'turns'")
        summary = str(item.get("summary", "Summary: the work so far is in the workspace."))
        scripts[item["prompt"].strip()] = (_turns(item["turns"], where), summary)
    return RoutedScripts(scripts)


def _read(path: str | Path) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"Cannot read the model script {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"The model script {path} is not valid JSON: {exc}") from exc


def _script(data: Any, where: str) -> tuple[list[ScriptedTurn], dict[str, list[ScriptedTurn]]]:
    subagents: Any = {}
    if isinstance(data, dict) and isinstance(data.get("turns"), list):
        data, subagents = data["turns"], data.get("subagents", {})
    if not isinstance(data, list) or not isinstance(subagents, dict):
        raise ValueError(
            f"The model script {where} must be a JSON list of turns, or "
            '{"turns": [...], "subagents": {"prompt prefix": [...]}}'
        )
    scripts = {}
    for key, turns in subagents.items():
        if not isinstance(turns, list):
            raise ValueError(f"{where}, subagent {key!r}: its turns must be a JSON list")
        scripts[key] = _turns(turns, f"{where}, subagent {key!r}")
    return _turns(data, where), scripts


def _turns(items: list[Any], where: str) -> list[ScriptedTurn]:
    return [_turn(item, f"{where}, turn {i + 1}") for i, item in enumerate(items)]


_TURN_KEYS = {"text", "thinking", "tool_calls", "delay", "error", "error_retryable"}


def _turn(item: Any, where: str) -> ScriptedTurn:
    if not isinstance(item, dict):
        raise ValueError(f"{where}: a turn must be an object")
    unknown = set(item) - _TURN_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}; known: {sorted(_TURN_KEYS)}")
    calls: list[tuple[str, dict[str, Any] | str]] = []
    for call in item.get("tool_calls", []):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise ValueError(f"{where}: each tool call needs a string 'name'")
        arguments = call.get("arguments", {})
        if not isinstance(arguments, dict | str):
            raise ValueError(f"{where}: tool call arguments must be an object or a string")
        calls.append((call["name"], arguments))
    return ScriptedTurn(
        text=str(item.get("text", "")),
        thinking=str(item.get("thinking", "")),
        tool_calls=calls,
        delay=float(item.get("delay", 0.0)),
        error=str(item.get("error", "")),
        error_retryable=bool(item.get("error_retryable", False)),
    )
