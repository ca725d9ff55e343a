"""Claude over the Anthropic Messages API: streamed text, parallel tool use, extended
thinking (sent back with its signatures), prompt caching."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import anthropic
import anthropic.types as wire

from burrow.llm.anthropic_errors import status_error, transport_error
from burrow.llm.anthropic_wire import request_body
from burrow.llm.base import (
    Done,
    Message,
    ModelError,
    StreamEvent,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
    redact,
)
from burrow.llm.catalog import describe
from burrow.llm.http_pool import shared_http
from burrow.llm.stalls import StallLimits, guard

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}
MIN_THINKING_BUDGET = 1024  # the API's minimum


class AnthropicProvider:
    """Streams one answer per call; never retries (wrap it in `RetryingProvider`).

    `thinking_budget` tokens of extended thinking per answer (0: none; ignored by models
    that cannot think, and any positive value turns on adaptive thinking for the models
    that decide for themselves); `max_tokens` defaults to the model's output limit.
    """

    def __init__(
        self,
        model: str,
        api_key: str,
        base_url: str | None = None,
        *,
        first_token_timeout: float = 180.0,
        idle_timeout: float = 120.0,
        connect_timeout: float = 10.0,
        thinking_budget: int = 0,
        max_tokens: int | None = None,
    ) -> None:
        info = describe("anthropic", model)
        self.model = model
        self.name = f"anthropic:{model}"
        self.base_url = (base_url or ANTHROPIC_BASE_URL).rstrip("/")
        self.limits = StallLimits(first_token_timeout, idle_timeout)
        self.max_tokens = max_tokens or info.max_output
        self.thinking = thinking_config(info.thinking, thinking_budget, self.max_tokens)
        self._api_key = api_key
        read = max(first_token_timeout, idle_timeout) + 30  # backs up the stall deadlines
        self._timeout = anthropic.Timeout(read, connect=connect_timeout)

    def _client(self) -> anthropic.AsyncAnthropic:
        # Cheap: the connections and TLS set-up are the loop's pool's (http_pool.py). Never
        # closed here: closing it would close the shared pool.
        return anthropic.AsyncAnthropic(
            api_key=self._api_key,
            base_url=self.base_url,
            max_retries=0,  # retries belong to RetryingProvider, which knows what was shown
            timeout=self._timeout,
            http_client=shared_http(),
        )

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        max_tokens: int | None = None,
    ) -> AsyncIterator[StreamEvent]:
        # A bounded call (a compaction's summary) is short work: no thinking, which would
        # need a budget under the bound.
        bounded = max_tokens is not None and max_tokens < self.max_tokens
        body = request_body(
            self.model,
            messages,
            tools,
            max_tokens=max_tokens if bounded and max_tokens else self.max_tokens,
            thinking=None if bounded else self.thinking,
        )
        guarded = guard(self._attempt(body), self.limits, self.base_url)
        async with contextlib.aclosing(guarded) as events:
            async for event in events:
                yield event

    async def _attempt(self, body: dict[str, Any]) -> AsyncGenerator[StreamEvent, None]:
        reader = _Reader()
        try:
            # The stream's own `async with` gives its connection back to the pool.
            stream = await self._client().messages.create(**body)
            async with stream:
                async for raw in stream:
                    for event in reader.read(raw):
                        yield event
        except ModelError as exc:
            redacted = self._redacted(exc)
            if redacted is exc:
                raise
            raise redacted from exc
        except anthropic.APIStatusError as exc:
            error = status_error(exc, base_url=self.base_url, model=self.model)
            raise self._redacted(error) from exc
        except anthropic.APIConnectionError as exc:
            error = transport_error(exc, base_url=self.base_url, started=reader.started)
            raise self._redacted(error) from exc
        except anthropic.APIError as exc:
            error = ModelError(
                f"The Anthropic API at {self.base_url} sent a malformed stream ({exc.message}).",
                retryable=True,
            )
            raise self._redacted(error) from exc
        if reader.stop_reason is None:
            raise ModelError(
                f"The model stream ended early: the Anthropic API at {self.base_url} closed it "
                "before the answer was finished. Trying again usually helps.",
                retryable=True,
            )
        yield reader.usage
        yield Done(FINISH.get(reader.stop_reason, reader.stop_reason))

    def _redacted(self, error: ModelError) -> ModelError:
        message = redact(error.message, self._api_key)
        if message == error.message:
            return error
        return ModelError(
            message, retryable=error.retryable, retry_after=error.retry_after, code=error.code
        )


def thinking_config(kind: str, budget: int, max_tokens: int) -> dict[str, Any] | None:
    """The request's `thinking` parameter, or None to leave thinking off."""
    if budget <= 0 or not kind:
        return None
    if kind == "adaptive":
        return {"type": "adaptive", "display": "summarized"}  # summarized: shown to the user
    budget = min(budget, max_tokens - 1024)  # the budget is part of max_tokens, below it
    if budget < MIN_THINKING_BUDGET:
        return None
    return {"type": "enabled", "budget_tokens": budget}


@dataclass
class _Block:
    kind: str
    text: list[str] = field(default_factory=list)
    signature: str = ""
    redacted: str = ""
    tool_index: int = -1


@dataclass
class _Reader:
    """Turns the API's stream events into Burrow's, one content block at a time."""

    blocks: dict[int, _Block] = field(default_factory=dict)
    tools: int = 0
    started: bool = False
    stop_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    _input: dict[str, int] = field(default_factory=dict)

    def read(self, event: Any) -> list[StreamEvent]:
        if isinstance(event, wire.RawMessageStartEvent):
            self._count(event.message.usage)
        elif isinstance(event, wire.RawContentBlockStartEvent):
            return self._start(event.index, event.content_block)
        elif isinstance(event, wire.RawContentBlockDeltaEvent):
            return self._delta(event.index, event.delta)
        elif isinstance(event, wire.RawContentBlockStopEvent):
            return self._stop(event.index)
        elif isinstance(event, wire.RawMessageDeltaEvent):
            self._count(event.usage)
            self.stop_reason = event.delta.stop_reason or "end_turn"
        return []

    def _start(self, index: int, block: Any) -> list[StreamEvent]:
        self.started = True
        kind = str(getattr(block, "type", ""))
        state = self.blocks[index] = _Block(kind)
        if isinstance(block, wire.TextBlock) and block.text:
            return [TextDelta(block.text)]
        if isinstance(block, wire.ThinkingBlock):
            state.text.append(block.thinking)
            state.signature = block.signature or ""
            return [ThinkingDelta(block.thinking)] if block.thinking else []
        if isinstance(block, wire.RedactedThinkingBlock):
            state.redacted = block.data
        elif isinstance(block, wire.ToolUseBlock):
            state.tool_index = self.tools
            self.tools += 1
            return [ToolCallDelta(state.tool_index, id=block.id, name=block.name)]
        return []  # server tools and blocks this version does not know: not for the loop

    def _delta(self, index: int, delta: Any) -> list[StreamEvent]:
        state = self.blocks.get(index)
        if state is None:
            raise ModelError(f"The Anthropic API sent a delta for block {index} before it began.")
        if isinstance(delta, wire.TextDelta):
            return [TextDelta(delta.text)] if delta.text else []
        if isinstance(delta, wire.ThinkingDelta):
            state.text.append(delta.thinking)
            return [ThinkingDelta(delta.thinking)] if delta.thinking else []
        if isinstance(delta, wire.SignatureDelta):
            state.signature += delta.signature
        elif (
            isinstance(delta, wire.InputJSONDelta) and state.tool_index >= 0 and delta.partial_json
        ):
            return [ToolCallDelta(state.tool_index, arguments=delta.partial_json)]
        return []

    def _stop(self, index: int) -> list[StreamEvent]:
        state = self.blocks.get(index)
        if state is None or state.kind not in ("thinking", "redacted_thinking"):
            return []
        block = ThinkingBlock("".join(state.text), state.signature, state.redacted)
        return [block]

    def _count(self, usage: Any) -> None:
        """The start's usage has the input, the last delta's the final output (and, from
        newer servers, the input again)."""
        for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
            value = getattr(usage, key, None)
            if isinstance(value, int):
                self._input[key] = value
        output = getattr(usage, "output_tokens", None)
        read = self._input.get("cache_read_input_tokens", 0)
        written = self._input.get("cache_creation_input_tokens", 0)
        self.usage = Usage(
            prompt_tokens=self._input.get("input_tokens", 0) + read + written,
            completion_tokens=output if isinstance(output, int) else self.usage.completion_tokens,
            cache_read_tokens=read,
            cache_write_tokens=written,
        )


async def list_models(
    api_key: str, base_url: str | None, *, key_in_settings: bool = False
) -> list[str]:
    """The models the key may use; raises `ModelError` saying what is wrong (naming the
    settings page's field when `key_in_settings`)."""
    url = (base_url or ANTHROPIC_BASE_URL).rstrip("/")
    try:
        async with anthropic.AsyncAnthropic(
            api_key=api_key, base_url=url, max_retries=0, timeout=15.0
        ) as client:
            page = await client.models.list(limit=1000)
            return [model.id for model in page.data]
    except anthropic.APIStatusError as exc:
        raise status_error(exc, base_url=url, model="", key_in_settings=key_in_settings) from exc
    except anthropic.APIConnectionError as exc:
        raise transport_error(exc, base_url=url, started=False) from exc
    except (anthropic.APIError, json.JSONDecodeError) as exc:
        raise ModelError(f"The Anthropic API at {url} answered with something unexpected.") from exc
