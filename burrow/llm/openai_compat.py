"""Chat completions over any OpenAI-compatible server (OpenAI, DeepSeek, vLLM, Ollama, ...)."""

from __future__ import annotations

import contextlib
import html
import json
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import replace
from typing import Any, Literal, overload

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from burrow.llm.base import (
    Done,
    Message,
    ModelError,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
    redact,
)
from burrow.llm.http_pool import shared_http
from burrow.llm.openai_errors import IN_ENVIRONMENT, SettingNames, status_error, transport_error
from burrow.llm.openai_wire import (
    ToolCallIndexes,
    answer_events,
    has_null_content,
    refuses_null_content,
    refuses_streamed_tools,
    thinking_of,
    usage_of,
    wire_messages,
    wire_tools,
    with_empty_content,
)
from burrow.llm.server_traits import saw, traits
from burrow.llm.stalls import StallLimits, guard
from burrow.llm.text_tool_calls import with_text_tool_calls

OPENAI_BASE_URL = "https://api.openai.com/v1"
PLACEHOLDER_KEY = "not-needed"  # local servers ignore the key, but the client sends one
# What is learnt of a server, once, and kept with the settings (server_traits.py): that it
# refuses a streamed request with tools (llama-cpp-python: "Automatic streaming tool choice
# is not supported"), then its tool turns go unstreamed; that it is llama-cpp-python, known
# by that refusal's words, whose chatml templates HTML-escape what the model reads (the model
# copies `&gt;` into its arguments); that it refuses `content: null` on an assistant turn
# with tool calls (OpenAI's own wire form; some validators want a string), then it gets "".
LLAMA_CPP_PYTHON_REFUSAL = "automatic streaming tool choice is not supported"


class OpenAICompatProvider:
    """Streams one answer per call; never retries (wrap it in `RetryingProvider`).

    `first_token_timeout` bounds the wait from the request to the first thinking, text or
    tool-call fragment; `idle_timeout` bounds every silence after that.
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
        include_usage: bool = True,
        names: SettingNames = IN_ENVIRONMENT,
    ) -> None:
        self.model = model
        self.names = names  # how its errors name the settings to check
        self.name = f"openai:{model}"
        self.base_url = (base_url or OPENAI_BASE_URL).rstrip("/")
        self.limits = StallLimits(first_token_timeout, idle_timeout)
        self.include_usage = include_usage
        self._api_key = api_key
        # The socket's own timeout only backs up the stall deadlines, which say more.
        read = max(first_token_timeout, idle_timeout) + 30
        self._timeout = openai.Timeout(read, connect=connect_timeout)

    def _client(self) -> openai.AsyncOpenAI:
        # Cheap: the connections and TLS set-up are the loop's pool's (http_pool.py). Never
        # closed here: closing it would close the shared pool.
        return openai.AsyncOpenAI(
            api_key=self._api_key,
            base_url=self.base_url,
            max_retries=0,  # retries belong to RetryingProvider, which knows what was shown
            timeout=self._timeout,
            http_client=shared_http(),
        )

    @overload
    async def _create(
        self, request: dict[str, Any], *, stream: Literal[True]
    ) -> openai.AsyncStream[ChatCompletionChunk]: ...

    @overload
    async def _create(
        self, request: dict[str, Any], *, stream: Literal[False]
    ) -> ChatCompletion: ...

    async def _create(
        self, request: dict[str, Any], *, stream: bool
    ) -> openai.AsyncStream[ChatCompletionChunk] | ChatCompletion:
        # `request` is already wire JSON (openai_wire.py). The SDK's `create` would walk it
        # again against its typed dicts, every message and tool schema: ~10 ms a turn of a
        # long conversation, the most of a tool's exit -> next request
        # (bench/real_model_turn.py). Its documented `post` sends it as it is.
        return await self._client().post(
            "/chat/completions",
            body=request,
            cast_to=ChatCompletion,
            stream=stream,
            stream_cls=openai.AsyncStream[ChatCompletionChunk],
        )

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        max_tokens: int | None = None,
    ) -> AsyncIterator[StreamEvent]:
        request: dict[str, Any] = {
            "model": self.model,
            "messages": wire_messages(messages),
            "stream": True,
        }
        if traits(self.base_url).empty_content:
            request = with_empty_content(request)
        if tools:  # some servers reject an empty list
            request["tools"] = wire_tools(tools)
        if self.include_usage:
            request["stream_options"] = {"include_usage": True}
        if max_tokens is not None:
            # OpenAI's own API takes only the newer name from its reasoning models on; the
            # other servers (llama.cpp, vLLM, Ollama, LM Studio) all know the older one.
            own = self.base_url == OPENAI_BASE_URL
            request["max_completion_tokens" if own else "max_tokens"] = max_tokens
        guarded = guard(self._attempt(request), self.limits, self.base_url)
        if tools:
            guarded = with_text_tool_calls(
                guarded,
                [tool.name for tool in tools],
                lambda form: saw(self.base_url, tool_format=form),
            )
        async with contextlib.aclosing(guarded) as events:
            async for event in events:
                yield event

    @property
    def _unstreamed_tools(self) -> bool:
        return traits(self.base_url).stream_tools is False

    async def _attempt(self, request: dict[str, Any]) -> AsyncGenerator[StreamEvent, None]:
        started = False
        try:
            if "tools" in request and self._unstreamed_tools:
                answer = self._unstreamed(request)
            else:
                answer = self._events(request)
            try:
                async with contextlib.aclosing(answer) as events:
                    async for event in events:
                        started = True
                        if isinstance(event, Done) and "tools" in request:
                            # before Done: a reader stops at it
                            saw(self.base_url, stream_tools=not self._unstreamed_tools)
                        yield event
            except openai.APIStatusError as exc:
                if not started and refuses_null_content(exc) and has_null_content(request):
                    # Once per server: its assistant turns get "" from now.
                    saw(self.base_url, empty_content=True)
                    async with contextlib.aclosing(
                        self._attempt(with_empty_content(request))
                    ) as events:
                        async for event in events:
                            yield event
                    return
                if started or "tools" not in request or not refuses_streamed_tools(exc):
                    raise
                # Once per server: its tool turns go unstreamed from now.
                escapes = LLAMA_CPP_PYTHON_REFUSAL in str(exc.message).lower()
                saw(self.base_url, stream_tools=False, escapes_html=escapes)
                async with contextlib.aclosing(self._unstreamed(request)) as events:
                    async for event in events:
                        yield event
        except ModelError as exc:
            redacted = self._redacted(exc)
            if redacted is exc:
                raise
            raise redacted from exc
        except openai.APIStatusError as exc:
            error = status_error(exc, base_url=self.base_url, model=self.model, names=self.names)
            raise self._redacted(error) from exc
        except openai.APIConnectionError as exc:
            raise self._redacted(
                transport_error(exc, base_url=self.base_url, started=started, names=self.names)
            ) from exc
        except openai.APIError as exc:  # an error event inside the stream
            raise self._redacted(
                ModelError(
                    f"The model server at {self.base_url} reported an error: {exc.message}",
                    retryable=True,
                )
            ) from exc
        except json.JSONDecodeError as exc:
            raise ModelError(
                f"The model server at {self.base_url} sent a stream chunk that is not JSON "
                f"({exc.msg} at position {exc.pos}): {self._snippet(exc.doc)}"
            ) from exc

    async def _events(self, request: dict[str, Any]) -> AsyncGenerator[StreamEvent, None]:
        indexes = ToolCallIndexes()
        finish_reason: str | None = None
        usage: Usage | None = None
        # The stream's own `async with` gives its connection back to the pool.
        stream = await self._create(request, stream=True)
        async with stream:
            async for chunk in stream:
                try:
                    events, finish, chunk_usage = self._read_chunk(chunk, indexes)
                except (AttributeError, TypeError, ValueError) as exc:
                    raise ModelError(
                        f"The model server at {self.base_url} sent a malformed stream "
                        f"chunk ({exc}): {self._snippet(repr(chunk))}"
                    ) from exc
                finish_reason = finish or finish_reason
                usage = chunk_usage or usage
                for event in events:
                    yield event
        if finish_reason is None:
            raise ModelError(
                f"The model stream ended early: the server at {self.base_url} closed it "
                "before the answer was finished. Trying again usually helps.",
                retryable=True,
            )
        if usage is not None:
            yield usage
        yield Done(finish_reason)

    async def _unstreamed(self, request: dict[str, Any]) -> AsyncGenerator[StreamEvent, None]:
        """One answer asked for whole (`stream` off): the events a stream of it would give."""
        request = {k: v for k, v in request.items() if k not in ("stream", "stream_options")}
        completion = await self._create(request, stream=False)
        try:
            events = answer_events(completion)
        except (AttributeError, TypeError, ValueError, IndexError) as exc:
            raise ModelError(
                f"The model server at {self.base_url} sent a malformed answer ({exc}): "
                f"{self._snippet(repr(completion))}"
            ) from exc
        for event in events:
            if isinstance(event, ToolCallDelta) and traits(self.base_url).escapes_html:
                event = replace(event, arguments=html.unescape(event.arguments))
            yield event

    def _read_chunk(
        self, chunk: Any, indexes: ToolCallIndexes
    ) -> tuple[list[StreamEvent], str | None, Usage | None]:
        usage = usage_of(chunk.usage)  # the last chunk with include_usage; some send it often
        if not chunk.choices:
            return [], None, usage
        choice = chunk.choices[0]
        events: list[StreamEvent] = []
        delta = choice.delta
        if delta is not None:
            thinking = thinking_of(delta)
            if thinking is not None:
                events.append(thinking)
            if delta.content:
                events.append(TextDelta(str(delta.content)))
            for position, fragment in enumerate(delta.tool_calls or ()):
                call: ToolCallDelta = indexes.delta(position, fragment)
                events.append(call)
        finish = choice.finish_reason
        return events, str(finish) if finish else None, usage

    def _redacted(self, error: ModelError) -> ModelError:
        message = redact(error.message, self._api_key)
        if message == error.message:
            return error
        return ModelError(message, retryable=error.retryable, retry_after=error.retry_after)

    def _snippet(self, text: str) -> str:
        text = redact(text, self._api_key)
        return repr(text if len(text) <= 200 else text[:200] + "…")


async def list_models(
    api_key: str, base_url: str | None, names: SettingNames = IN_ENVIRONMENT
) -> list[str]:
    """The models the server offers the key; raises `ModelError` saying what is wrong
    (naming `names`: where the key and URL were set)."""
    url = (base_url or OPENAI_BASE_URL).rstrip("/")
    try:
        async with openai.AsyncOpenAI(
            api_key=api_key or PLACEHOLDER_KEY, base_url=url, max_retries=0, timeout=15.0
        ) as client:
            return [model.id async for model in client.models.list()]
    except openai.APIStatusError as exc:
        raise status_error(exc, base_url=url, model="", names=names) from exc
    except openai.APIConnectionError as exc:
        raise transport_error(exc, base_url=url, started=False, names=names) from exc
    except (openai.APIError, json.JSONDecodeError) as exc:
        raise ModelError(f"The model server at {url} answered with something unexpected.") from exc
