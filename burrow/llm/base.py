"""What the agent loop needs from a model: a streamed answer to a conversation.

Providers translate these neutral types to and from their wire format. The loop never
sees a provider's SDK objects.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text exactly as the model produced it (may be invalid)


@dataclass(frozen=True)
class ThinkingBlock:
    """One block of reasoning exactly as the provider returned it.

    Anthropic checks `signature` against `text` when the block comes back on a later turn,
    and a redacted block is only `redacted` (opaque data), so both travel unchanged. As a
    stream event it arrives once the block is complete, after its `ThinkingDelta`s.
    """

    text: str = ""
    signature: str = ""
    redacted: str = ""  # the data of a `redacted_thinking` block; then text is empty


@dataclass(frozen=True)
class Image:
    """An image in a user message, base64-encoded."""

    media_type: str  # image/png, image/jpeg, image/gif, image/webp
    data: str


@dataclass(frozen=True)
class Message:
    """One entry of the model context: a turn as content blocks (text, thinking, images,
    tool calls, a tool result), the same for every provider."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    thinking: str = ""  # assistant only
    tool_calls: tuple[ToolCall, ...] = ()  # assistant only
    tool_call_id: str = ""  # tool only
    name: str = ""  # tool only: the tool's name
    thinking_blocks: tuple[ThinkingBlock, ...] = ()  # assistant only: sent back as they came
    images: tuple[Image, ...] = ()  # user only
    # User only: workspace paths of attached files. Providers ignore them; a run hook
    # (runs/loop/hooks/attachments.py) turns them into `images` or a note before each request.
    attachments: tuple[str, ...] = ()


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
    """Tokens of one answer or a sum of them, and what they cost. `prompt_tokens` counts the
    whole input; the cache counts are the parts of it read from or written to the
    provider's prompt cache. A provider reports tokens; `priced` adds the cost.

    The one shape of usage: an answer's, a run's tally, a batch's change to the conversation
    row and the row's totals are all this, summed with `+`."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float = 0.0  # dollars

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cost=self.cost + other.cost,
        )

    @property
    def tokens(self) -> int:
        """Prompt and completion tokens: what a `tokens` budget counts."""
        return self.prompt_tokens + self.completion_tokens

    def priced(self, pricer: Pricer) -> Usage:
        return replace(self, cost=pricer.cost(self))


@dataclass(frozen=True)
class Done:
    """The end of one model answer."""

    finish_reason: str = "stop"


@dataclass(frozen=True)
class Retry:
    """A failed attempt is tried again after `delay_s`; nothing of it reached the caller."""

    attempt: int  # the attempt that failed, from 1
    delay_s: float
    reason: str


StreamEvent = TextDelta | ThinkingDelta | ThinkingBlock | ToolCallDelta | Usage | Retry | Done


CONTEXT_TOO_LONG = "context_too_long"  # ModelError.code: the request exceeded the window


class ModelError(Exception):
    """A model call failed. `retryable` says whether trying again may help; `code` names
    failures a caller may act on (`context_too_long`: compact, then try again)."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        retry_after: float | None = None,
        code: str = "",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.retry_after = retry_after  # seconds the server asked us to wait, if it said
        self.code = code


def redact(text: str, api_key: str) -> str:
    """`text` without `api_key`: servers echo keys back in error messages."""
    return text.replace(api_key, "***") if len(api_key) >= 4 else text


def stream_lost(exc: BaseException, base_url: str) -> ModelError:
    """A connection that broke after the answer began: retryable, and said as it was."""
    cause = exc.__cause__ or exc
    detail = f"{type(cause).__name__}: {cause}".rstrip(": ")
    return ModelError(
        f"The model stream ended early: the connection to {base_url} was lost ({detail}).",
        retryable=True,
    )


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds a `Retry-After` header asks for; None when absent or an HTTP date (the
    backoff then decides)."""
    value = headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class Provider(Protocol):
    """A model endpoint. `stream` yields deltas, usage, and exactly one final `Done`;
    `max_tokens` bounds the answer where the caller needs a short one (a summary), else
    the provider's own limit holds. Scripted and demo turns are short: they ignore it."""

    name: str  # shown in settings and logs, e.g. "openai:gpt-4o-mini" or "demo"

    def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        max_tokens: int | None = None,
    ) -> AsyncIterator[StreamEvent]: ...


@dataclass(frozen=True)
class Pricing:
    """Dollars per million tokens, for the `cost` of usage events. Cache reads and writes
    are priced on their own (None: as ordinary prompt tokens)."""

    prompt: float = 0.0
    completion: float = 0.0
    cache_read: float | None = None
    cache_write: float | None = None

    def cost(self, usage: Usage) -> float:
        read = self.prompt if self.cache_read is None else self.cache_read
        write = self.prompt if self.cache_write is None else self.cache_write
        uncached = usage.prompt_tokens - usage.cache_read_tokens - usage.cache_write_tokens
        return (
            max(0, uncached) * self.prompt
            + usage.cache_read_tokens * read
            + usage.cache_write_tokens * write
            + usage.completion_tokens * self.completion
        ) / 1e6


class Pricer(Protocol):
    """Whatever prices a run's usage (a fixed `Pricing`, or the model settings)."""

    def cost(self, usage: Usage) -> float: ...


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
