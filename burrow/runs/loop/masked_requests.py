"""Every request a conversation sends to its model leaves with the owner's secret values
masked as `****`: the system prompt, every message and every tool's name, description and
schema.

The journal masks what it records, but a request also carries text that never passed
through it: the system prompt (AGENTS.md and skill descriptions, read from the workspace)
and the tools (an MCP server's descriptions). `MaskedProvider` wraps the one provider a
conversation's runs, subagents and compactions all call (runtime.py's `_model`), with the
journal's own mask, so nothing reaches a provider unmasked whichever path assembled it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import replace

from burrow.llm.base import Message, Provider, StreamEvent, ThinkingBlock, ToolCall, ToolSpec
from burrow.sandbox.masking import SecretMask

# The conversation's current mask (every value of its owner's secrets, chosen or not).
MaskSource = Callable[[], Awaitable[SecretMask]]


class MaskedProvider:
    """`inner`, seeing each request only after `mask` has been applied to all of it."""

    def __init__(self, inner: Provider, mask: MaskSource) -> None:
        self._inner = inner
        self._mask = mask
        self.name = inner.name
        # Each step sends the context again: a message of the last request (the same
        # object, kept alive here so its id stays its own) is not masked again while the
        # mask's values stay the same. Only the last request's are kept.
        self._masked_with: tuple[str, ...] = ()
        self._masked: dict[int, tuple[Message, Message]] = {}

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        max_tokens: int | None = None,
    ) -> AsyncIterator[StreamEvent]:
        mask = await self._mask()
        if mask:  # no secrets: the request goes as it is, at no cost
            messages = self._messages(messages, mask)
            tools = [masked_tool(t, mask) for t in tools]
        stream = self._inner.stream(messages, tools, max_tokens)
        async with contextlib.aclosing(stream):  # type: ignore[type-var]
            async for item in stream:
                yield item

    def _messages(self, messages: Sequence[Message], mask: SecretMask) -> list[Message]:
        before = self._masked if mask.forms == self._masked_with else {}
        now: dict[int, tuple[Message, Message]] = {}
        for message in messages:
            known = before.get(id(message))
            masked = known[1] if known and known[0] is message else masked_message(message, mask)
            now[id(message)] = (message, masked)
        self._masked_with, self._masked = mask.forms, now
        return [now[id(m)][1] for m in messages]


def masked_message(message: Message, mask: SecretMask) -> Message:
    """`message` with every text masked; thinking signatures and redacted thinking stay as
    the provider sent them (opaque to us; a changed block text fails its turn, closed)."""
    text = mask.text
    return replace(
        message,
        content=text(message.content),
        thinking=text(message.thinking),
        name=text(message.name),
        tool_calls=tuple(
            ToolCall(c.id, text(c.name), text(c.arguments)) for c in message.tool_calls
        ),
        thinking_blocks=tuple(
            ThinkingBlock(text(b.text), b.signature, b.redacted) for b in message.thinking_blocks
        ),
    )


def masked_tool(tool: ToolSpec, mask: SecretMask) -> ToolSpec:
    parameters = mask.data(tool.parameters)
    return ToolSpec(mask.text(tool.name), mask.text(tool.description), parameters)
