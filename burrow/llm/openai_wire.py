"""Burrow's neutral messages and tools in the chat-completions wire format, and back."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from burrow.llm.base import (
    Done,
    Message,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
)

# Some servers reject an empty tool message; the model still needs to see that it ran.
EMPTY_TOOL_OUTPUT = "(no output)"


def wire_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The request's `messages`. Thinking is not sent back: most servers reject it."""
    wire: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "assistant":
            if not message.content and not message.tool_calls:
                continue  # e.g. an interrupted answer that only thought: nothing to send
            entry: dict[str, Any] = {"role": "assistant", "content": message.content}
            if message.tool_calls:
                # With tool calls an empty content is null; several servers refuse "".
                entry["content"] = message.content or None
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments or "{}"},
                    }
                    for call in message.tool_calls
                ]
            wire.append(entry)
        elif message.role == "tool":
            wire.append(
                {
                    "role": "tool",
                    "tool_call_id": message.tool_call_id,
                    "content": message.content or EMPTY_TOOL_OUTPUT,
                }
            )
        elif message.images:
            parts: list[dict[str, Any]] = [
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:{image.media_type};base64,{image.data}"},
                }
                for image in message.images
            ]
            if message.content:
                parts.append({"type": "text", "text": message.content})
            wire.append({"role": message.role, "content": parts})
        else:
            wire.append({"role": message.role, "content": message.content})
    return wire


def wire_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            },
        }
        for tool in tools
    ]


def thinking_of(delta: Any) -> ThinkingDelta | None:
    """Reasoning text of a delta: `reasoning_content` (DeepSeek, older vLLM) or `reasoning`
    (newer vLLM, OpenRouter, Ollama). Servers sending both repeat the text, so take one."""
    for key in ("reasoning_content", "reasoning"):
        value = getattr(delta, key, None)
        if isinstance(value, str) and value:
            return ThinkingDelta(value)
    return None


@dataclass
class ToolCallIndexes:
    """Gives each streamed tool call a stable index of its own.

    Servers mostly number parallel calls with `index`, but some send every call with
    index 0 (or none) and tell them apart only by a new `id`.
    """

    by_server_index: dict[int, int] = field(default_factory=dict)
    ids: dict[int, str] = field(default_factory=dict)  # our index -> the call's id

    def delta(self, position: int, fragment: Any) -> ToolCallDelta:
        server_index = getattr(fragment, "index", None)  # a whole answer's calls have none
        server_index = server_index if isinstance(server_index, int) else position
        call_id = fragment.id if isinstance(fragment.id, str) else ""
        index = self.by_server_index.get(server_index)
        if index is None or (call_id and self.ids.get(index, call_id) != call_id):
            index = len(self.ids)
            self.by_server_index[server_index] = index
        if call_id:
            self.ids[index] = call_id
        self.ids.setdefault(index, "")
        function = fragment.function
        name = getattr(function, "name", None) or ""
        arguments = getattr(function, "arguments", None) or ""
        if not isinstance(arguments, str):  # some servers send the object itself
            arguments = json.dumps(arguments)
        if not isinstance(name, str):
            raise TypeError(f"tool call name is {type(name).__name__}, not a string")
        return ToolCallDelta(index=index, id=call_id, name=name, arguments=arguments)


def usage_of(usage: Any) -> Usage | None:
    """A response's or a stream's last chunk's `usage` (some local servers send none)."""
    if usage is None:
        return None
    details = getattr(usage, "prompt_tokens_details", None)
    return Usage(
        prompt_tokens=int(usage.prompt_tokens or 0),
        completion_tokens=int(usage.completion_tokens or 0),
        # Automatic prompt caching: the cached part of the prompt, priced lower.
        cache_read_tokens=int(getattr(details, "cached_tokens", None) or 0),
    )


def answer_events(completion: Any) -> list[StreamEvent]:
    """A whole `chat.completion` as the events its stream would have given."""
    choice = completion.choices[0]
    message = choice.message
    events: list[StreamEvent] = []
    thinking = thinking_of(message)
    if thinking is not None:
        events.append(thinking)
    if message.content:
        events.append(TextDelta(str(message.content)))
    indexes = ToolCallIndexes()
    for position, call in enumerate(message.tool_calls or ()):
        events.append(indexes.delta(position, call))
    usage = usage_of(completion.usage)
    if usage is not None:
        events.append(usage)
    events.append(Done(str(choice.finish_reason or "stop")))
    return events


def refuses_null_content(error: Any) -> bool:
    """The server's refusal of an assistant message whose content is null (a validator
    that wants a string: "messages[2].content: expected a string, got null")."""
    text = _error_text(error)
    return (
        error.status_code in (400, 422, 500)
        and "content" in text
        and any(word in text for word in ("null", "none", "string"))
    )


def has_null_content(request: dict[str, Any]) -> bool:
    return any(m.get("content", "") is None for m in request.get("messages", []))


def with_empty_content(request: dict[str, Any]) -> dict[str, Any]:
    """`request` with each null content an empty string."""
    messages = [
        {**m, "content": ""} if m.get("content", "") is None else m
        for m in request.get("messages", [])
    ]
    return {**request, "messages": messages}


def _error_text(error: Any) -> str:
    body = getattr(error, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        body = body["error"]
    message = body.get("message") if isinstance(body, dict) else None
    return str(message if isinstance(message, str) else getattr(error, "message", "")).lower()


def refuses_streamed_tools(error: Any) -> bool:
    """The server's refusal of streaming with tools, not of the request (llama-cpp-python's
    chat handlers: a 500, "Automatic streaming tool choice is not supported")."""
    text = _error_text(error)
    return error.status_code in (400, 422, 500, 501) and "stream" in text and "tool" in text
