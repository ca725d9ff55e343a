"""A provider's stream, closed where the agent loop closes it (at Done), closes everything
under it then and there: no inner generator is left for the garbage collector to finalize in
a task of its own later (for a real provider, that inner generator holds the HTTP response)."""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import burrow
from burrow.llm.anthropic_messages import AnthropicProvider
from burrow.llm.base import Done, Message, Provider, ScriptedTurn, ToolSpec
from burrow.llm.demo import DemoProvider
from burrow.llm.openai_compat import OpenAICompatProvider
from burrow.llm.scripted import ScriptedProvider
from tests.fakes import FakeOpenAIServer, tool_call_reply
from tests.fakes.anthropic_server import FakeAnthropicServer, message, text

BURROW = str(Path(burrow.__file__).parent)
HELLO = [Message(role="user", content="hello")]
BASH = ToolSpec("bash", "Run a command", {"type": "object", "properties": {}})


@contextlib.contextmanager
def finalized_by_gc() -> Iterator[list[Any]]:
    """The async generators the collector hands to the loop's finalizer meanwhile."""
    hooks = sys.get_asyncgen_hooks()
    finalized: list[Any] = []

    def finalizer(agen: Any) -> None:
        finalized.append(agen)
        if hooks.finalizer is not None:
            hooks.finalizer(agen)

    sys.set_asyncgen_hooks(firstiter=hooks.firstiter, finalizer=finalizer)
    try:
        yield finalized
    finally:
        sys.set_asyncgen_hooks(*hooks)


async def read_to_done(provider: Provider) -> None:
    """As the agent loop reads an answer: up to Done, then close the stream."""
    stream = provider.stream(HELLO, [BASH])
    async with contextlib.aclosing(stream):  # type: ignore[type-var]
        async for event in stream:
            if isinstance(event, Done):
                break
    del stream
    gc.collect()


async def assert_nothing_left_to_gc(provider: Provider) -> None:
    with finalized_by_gc() as finalized:
        await read_to_done(provider)
    # The openai SDK leaves one of its own (AsyncStream._iter_events) to the collector; its
    # `async with` has closed the HTTP response already. Burrow's own must all be closed.
    ours = [agen.__qualname__ for agen in finalized if agen.ag_code.co_filename.startswith(BURROW)]
    assert ours == []


@pytest.mark.parametrize("name", ["scripted", "demo"])
async def test_offline_models(name: str) -> None:
    turn = ScriptedTurn(text="ok", tool_calls=[("bash", {"command": "true"})])
    provider = ScriptedProvider([turn]) if name == "scripted" else DemoProvider(chunk_delay=0)
    await assert_nothing_left_to_gc(provider)


async def test_openai_compatible(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(tool_call_reply([("bash", {"command": "true"})]))
    await assert_nothing_left_to_gc(OpenAICompatProvider("m", "sk-x", fake_openai.base_url))


async def test_anthropic(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.enqueue(message([text("Hello.")]))
    await assert_nothing_left_to_gc(
        AnthropicProvider("claude-test", "sk-ant-x", fake_anthropic.base_url)
    )
