"""Read a provider's stream into one answer, assembling tool calls the way the loop does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from burrow.llm.base import (
    Done,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)


@dataclass
class Answer:
    events: list[StreamEvent] = field(default_factory=list)
    text: str = ""
    thinking: str = ""
    calls: dict[int, dict[str, str]] = field(default_factory=dict)
    usage: Usage | None = None
    finish_reason: str | None = None

    @property
    def tool_calls(self) -> list[ToolCall]:
        """Fragments grouped by index: id and name from the first that has them,
        arguments concatenated in arrival order."""
        return [ToolCall(**self.calls[i]) for i in sorted(self.calls)]


async def collect(stream: AsyncIterator[StreamEvent]) -> Answer:
    answer = Answer()
    async for event in stream:
        answer.events.append(event)
        assert answer.finish_reason is None, f"{event} after Done"
        if isinstance(event, TextDelta):
            answer.text += event.text
        elif isinstance(event, ThinkingDelta):
            answer.thinking += event.text
        elif isinstance(event, ToolCallDelta):
            call = answer.calls.setdefault(event.index, {"id": "", "name": "", "arguments": ""})
            call["id"] = call["id"] or event.id
            call["name"] = call["name"] or event.name
            call["arguments"] += event.arguments
        elif isinstance(event, Usage):
            answer.usage = event
        elif isinstance(event, Done):
            answer.finish_reason = event.finish_reason
    return answer
