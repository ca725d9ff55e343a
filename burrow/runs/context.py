"""The model context as a projection of the journal.

Rebuilding from events (not from a separate transcript) is what lets a restarted server,
or another replica, continue a conversation exactly where it was.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from burrow.llm.base import Message, ThinkingBlock, ToolCall
from burrow.runs.events import EventType
from burrow.store.records import Event

NOT_RUN = "(not run: the run ended before this tool call was carried out)"


def arguments_json(arguments: Any) -> str:
    """Tool-call arguments as the model should see them again in its history."""
    if isinstance(arguments, dict):
        return json.dumps(arguments, ensure_ascii=False)
    # Invalid JSON the model once produced: servers reject it in history, and the tool
    # result already tells the model what was wrong.
    return "{}"


def thinking_blocks_data(blocks: list[ThinkingBlock]) -> dict[str, Any]:
    """The `thinking_blocks` field of `assistant.message` (absent when there are none)."""
    if not blocks:
        return {}
    return {
        "thinking_blocks": [
            {"type": "redacted_thinking", "data": b.redacted}
            if b.redacted
            else {"type": "thinking", "thinking": b.text, "signature": b.signature}
            for b in blocks
        ]
    }


def thinking_blocks_of(data: dict[str, Any]) -> tuple[ThinkingBlock, ...]:
    return tuple(
        ThinkingBlock(redacted=str(b.get("data", "")))
        if b.get("type") == "redacted_thinking"
        else ThinkingBlock(str(b.get("thinking", "")), str(b.get("signature", "")))
        for b in data.get("thinking_blocks") or []
    )


@dataclass
class ModelContext:
    messages: list[Message] = field(default_factory=list)
    last_seq: int = 0
    user_messages: int = 0  # how many user messages have been seen, for steering checks
    _pending_calls: dict[str, str] = field(default_factory=dict)  # call_id -> tool name
    _deferred: list[Message] = field(default_factory=list)

    def apply(self, event: Event) -> None:
        if event.seq <= self.last_seq:
            return
        self.last_seq = event.seq
        data = event.data
        if event.type == EventType.USER_MESSAGE:
            self.user_messages += 1
            message = Message(role="user", content=str(data.get("content", "")))
            if self._pending_calls:
                # Steering that arrived while tools ran goes after their results: the
                # chat format wants tool results right after the assistant's calls.
                self._deferred.append(message)
            else:
                self.messages.append(message)
        elif event.type == EventType.ASSISTANT_MESSAGE:
            self._close_pending()
            calls = tuple(
                ToolCall(id=c["id"], name=c["name"], arguments=arguments_json(c["arguments"]))
                for c in data.get("tool_calls") or []
            )
            self.messages.append(
                Message(
                    role="assistant",
                    content=str(data.get("content") or ""),
                    thinking=str(data.get("thinking") or ""),
                    tool_calls=calls,
                    thinking_blocks=thinking_blocks_of(data),
                )
            )
            self._pending_calls = {c.id: c.name for c in calls}
        elif event.type == EventType.TOOL_FINISHED:
            call_id = str(data.get("call_id"))
            name = self._pending_calls.pop(call_id, None)
            if name is not None:
                self.messages.append(
                    Message(
                        role="tool",
                        content=str(data.get("output", "")),
                        tool_call_id=call_id,
                        name=name,
                    )
                )
                if not self._pending_calls:
                    self._flush_deferred()
        elif event.type == EventType.RUN_FINISHED:
            self._close_pending()

    def _close_pending(self) -> None:
        for call_id, name in self._pending_calls.items():
            self.messages.append(
                Message(role="tool", content=NOT_RUN, tool_call_id=call_id, name=name)
            )
        self._pending_calls = {}
        self._flush_deferred()

    def _flush_deferred(self) -> None:
        self.messages.extend(self._deferred)
        self._deferred = []
