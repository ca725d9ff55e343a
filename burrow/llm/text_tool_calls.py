"""Tool calls a local model server left in the answer's text, taken out of it.

Servers that template tool calls themselves (llama.cpp without `--jinja`, Ollama and
vLLM with some chat templates, llama-cpp-python's plain chat formats) often return the
model's call as text instead of `tool_calls`: Hermes-style `<tool_call>{"name": …,
"arguments": {…}}</tool_call>` blocks, or a JSON object that is the whole answer. Read as
prose, such an answer ended the run with nothing done. A call is taken only when it names
a tool the request offered and its arguments are an object (or a JSON string of one);
everything else stays text, byte for byte. Text streams on as it comes, except what may be
the start of a block (held until it is told apart) and an answer that opens with `{`
(held to its end: only then can it be told from prose that happens to be JSON).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Literal

from burrow.llm.base import Done, StreamEvent, TextDelta, ToolCallDelta

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_BLOCK = re.compile(re.escape(OPEN) + r"(.*?)" + re.escape(CLOSE), re.DOTALL)


@dataclass(frozen=True)
class TextToolCall:
    name: str
    arguments: str  # JSON of an object


def read_call(text: str, tools: Collection[str]) -> TextToolCall | None:
    """`{"name": …, "arguments": {…}}` (or `parameters`) naming an offered tool, or None."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    name = value.get("name")
    arguments: Any = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):  # the arguments as a JSON string, as the wire has them
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(name, str) or name not in tools or not isinstance(arguments, dict):
        return None
    return TextToolCall(name, json.dumps(arguments))


def read_calls(text: str, tools: Collection[str]) -> list[TextToolCall] | None:
    """A whole answer that is one call, or a JSON list of calls; None if it is not."""
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            items = json.loads(stripped)
        except ValueError:
            return None
        if not isinstance(items, list) or not items:
            return None
        calls = [read_call(json.dumps(item), tools) for item in items]
        return None if any(call is None for call in calls) else [c for c in calls if c]
    call = read_call(stripped, tools)
    return None if call is None else [call]


@dataclass
class TextToolCallReader:
    """Fed the answer's text as it streams; says what to show now and, at the end, the
    calls found. Used only when the request offered tools."""

    tools: Collection[str]
    calls: list[TextToolCall] = field(default_factory=list)
    taken: str = ""
    """The text the calls were read from: shown after all when the server sent calls of
    its own too (two ways of calling in one answer: the server's are the calls)."""
    _held: str = ""
    _whole: bool | None = None  # an answer that opens with `{` or `[`: held to its end

    def feed(self, text: str) -> str:
        """The text that can be shown now."""
        self._held += text
        if self._whole is None:
            start = self._held.lstrip()
            if not start:
                return ""
            self._whole = start[0] in "{["
        if self._whole:
            return ""
        return self._release(final=False)

    def finish(self) -> str:
        """The text left to show once the answer ended; `calls` is then complete."""
        if self._whole:
            calls = read_calls(self._held, self.tools)
            if calls is not None:
                self.calls += calls
                self.taken += self._held
                self._held = ""
                return ""
        return self._release(final=True)

    def _release(self, *, final: bool) -> str:
        shown = []
        while True:
            start = self._held.find(OPEN)
            if start < 0:
                break
            end = self._held.find(CLOSE, start)
            if end < 0:
                if not final:  # the block is still coming
                    shown.append(self._held[:start])
                    self._held = self._held[start:]
                    return "".join(shown)
                break
            block = self._held[start : end + len(CLOSE)]
            call = read_call(block[len(OPEN) : -len(CLOSE)].strip(), self.tools)
            if call is not None:
                self.calls.append(call)
                self.taken += block
                shown.append(self._held[:start])
            else:
                shown.append(self._held[: end + len(CLOSE)])
            self._held = self._held[end + len(CLOSE) :]
        if final:
            shown.append(self._held)
            self._held = ""
            return "".join(shown)
        # Hold back an ending that may be the start of `<tool_call>`.
        keep = next(
            (n for n in range(min(len(OPEN) - 1, len(self._held)), 0, -1)
             if OPEN.startswith(self._held[-n:])),
            0,
        )  # fmt: skip
        shown.append(self._held[: len(self._held) - keep])
        self._held = self._held[len(self._held) - keep :]
        return "".join(shown)


async def with_text_tool_calls(
    events: AsyncIterator[StreamEvent],
    tools: Collection[str],
    seen: Callable[[Literal["native", "text"]], None] = lambda _format: None,
) -> AsyncGenerator[StreamEvent, None]:
    """`events` with the tool calls found in their text sent as calls, after the server's
    own (numbered on from them), just before the answer's end. `seen` hears how an
    answer's calls came, when it had any."""
    reader = TextToolCallReader(tools)
    native: set[int] = set()
    async with contextlib.aclosing(events) as stream:  # type: ignore[type-var]
        async for event in stream:
            passed = _passed(event, reader, native)
            if isinstance(event, Done) and (native or reader.calls):
                seen("native" if native else "text")  # before Done: a reader stops at it
            for out in passed:
                yield out


def _passed(event: StreamEvent, reader: TextToolCallReader, native: set[int]) -> list[StreamEvent]:
    """What `with_text_tool_calls` sends on for one event of the answer."""
    if isinstance(event, TextDelta):
        shown = reader.feed(event.text)
        return [TextDelta(shown)] if shown else []
    out: list[StreamEvent] = []
    if isinstance(event, ToolCallDelta):
        native.add(event.index)
    elif isinstance(event, Done):
        rest = reader.finish()
        if native and reader.taken:
            rest += reader.taken  # the server's calls are the calls; the rest is text
        if rest:
            out.append(TextDelta(rest))
        if not native:
            out += [
                ToolCallDelta(index=n, id=f"call_text_{n}", name=c.name, arguments=c.arguments)
                for n, c in enumerate(reader.calls)
            ]
    out.append(event)
    return out
