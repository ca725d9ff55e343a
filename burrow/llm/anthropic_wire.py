"""Burrow's messages in the Anthropic Messages API format.

Thinking blocks go back exactly as they came (text and signature, or a redacted block's
opaque data): the API verifies them, and dropping them breaks tool use with thinking.
Cache breakpoints sit on the tools, the system prompt and the ends of the last two user
turns, so every request reads the conversation so far from the prompt cache.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from burrow.llm.base import Message, ThinkingBlock, ToolSpec

EPHEMERAL = {"type": "ephemeral"}
EMPTY_TOOL_OUTPUT = "(no output)"
EMPTY_MESSAGE = "(empty message)"  # the API rejects empty text blocks
CACHEABLE = {"text", "image", "tool_use", "tool_result"}  # thinking blocks cannot be marked


def request_body(
    model: str,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    *,
    max_tokens: int,
    thinking: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "messages": wire_messages(messages),
        "stream": True,
    }
    system = [
        {"type": "text", "text": m.content} for m in messages if m.role == "system" and m.content
    ]
    if system:
        body["system"] = system
    if tools:
        body["tools"] = wire_tools(tools)
    if thinking is not None:
        body["thinking"] = thinking
    mark_cache(body)
    return body


def wire_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
        for tool in tools
    ]


def thinking_block(block: ThinkingBlock) -> dict[str, Any]:
    if block.redacted:
        return {"type": "redacted_thinking", "data": block.redacted}
    return {"type": "thinking", "thinking": block.text, "signature": block.signature}


def tool_input(arguments: str) -> Any:
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return {}  # the tool result already told the model its JSON was invalid
    return value if isinstance(value, dict) else {}


def _content(message: Message) -> list[dict[str, Any]]:
    if message.role == "assistant":
        blocks = [thinking_block(b) for b in message.thinking_blocks]
        if message.content:
            blocks.append({"type": "text", "text": message.content})
        blocks += [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": tool_input(c.arguments)}
            for c in message.tool_calls
        ]
        return blocks
    if message.role == "tool":
        text = message.content or EMPTY_TOOL_OUTPUT
        return [{"type": "tool_result", "tool_use_id": message.tool_call_id, "content": text}]
    blocks = [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": i.media_type, "data": i.data},
        }
        for i in message.images
    ]
    if message.content or not blocks:
        blocks.append({"type": "text", "text": message.content or EMPTY_MESSAGE})
    return blocks


def wire_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Alternating user and assistant turns: tool results and the user messages after them
    share one user turn (results first, as the API requires)."""
    wire: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        if message.role == "assistant" and not (message.content or message.tool_calls):
            continue  # an answer stopped while thinking: nothing the API would accept
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _content(message)
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    return wire


def mark_cache(body: dict[str, Any]) -> None:
    """At most four breakpoints (the API's limit): tools, system, the last two user turns."""
    if body.get("tools"):
        body["tools"][-1]["cache_control"] = EPHEMERAL
    if body.get("system"):
        body["system"][-1]["cache_control"] = EPHEMERAL
    user_turns = [m for m in body["messages"] if m["role"] == "user"]
    for turn in user_turns[-2:]:
        cacheable = [b for b in turn["content"] if b["type"] in CACHEABLE]
        if cacheable:
            cacheable[-1]["cache_control"] = EPHEMERAL
