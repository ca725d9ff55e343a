"""What the agent loop needs from a model: a streamed answer to a conversation.

Providers translate these neutral types to and from their wire format. The loop never
sees a provider's SDK objects.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text exactly as the model produced it (may be invalid)


@dataclass(frozen=True)
class Message:
    """One entry of the model context, in chat-completions terms."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    thinking: str = ""  # assistant only
    tool_calls: tuple[ToolCall, ...] = ()  # assistant only
    tool_call_id: str = ""  # tool only
    name: str = ""  # tool only: the tool's name


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model sees it: a name, a description and a JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ThinkingDelta:
    text: str


@dataclass(frozen=True)
class ToolCallDelta:
    """A fragment of a streamed tool call; fragments with the same index form one call."""

    index: int
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class Done:
    """The end of one model answer."""

    finish_reason: str = "stop"


StreamEvent = TextDelta | ThinkingDelta | ToolCallDelta | Usage | Done


class ModelError(Exception):
    """A model call failed. `retryable` says whether trying again may help."""

    def __init__(
        self, message: str, *, retryable: bool = False, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.retry_after = retry_after  # seconds the server asked us to wait, if it said


class Provider(Protocol):
    """A model endpoint. `stream` yields deltas, usage, and exactly one final `Done`."""

    name: str  # shown in settings and logs, e.g. "openai:gpt-4o-mini" or "demo"

    def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AsyncIterator[StreamEvent]: ...


@dataclass
class Pricing:
    """Dollars per million tokens, for the `cost` of usage events."""

    prompt: float = 0.0
    completion: float = 0.0

    def cost(self, usage: Usage) -> float:
        return (usage.prompt_tokens * self.prompt + usage.completion_tokens * self.completion) / 1e6


@dataclass
class ScriptedTurn:
    """One scripted model answer: optional thinking, text, and tool calls."""

    text: str = ""
    thinking: str = ""
    # (name, arguments): a dict is sent as JSON, a str verbatim (so it may be invalid JSON)
    tool_calls: list[tuple[str, dict[str, Any] | str]] = field(default_factory=list)
    delay: float = 0.0  # seconds before each streamed chunk, to test interrupts mid-stream
    error: str = ""  # if set, raise ModelError(error) after the thinking and text
    error_retryable: bool = False
