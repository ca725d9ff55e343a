"""A real OpenAI-compatible HTTP server on 127.0.0.1 that streams scripted replies.

    with FakeOpenAIServer() as srv:
        srv.enqueue(text_reply("Hello!"), tool_call_reply([("bash", {"command": "ls"})]))
        provider = OpenAICompatProvider("fake-model", "sk-test", srv.base_url)
        ...
        assert srv.requests[0]["messages"][-1]["content"] == "hi"

Each POST /v1/chat/completions takes the next queued reply (a `StreamReply` or an
`ErrorReply`); with none left it answers "(fake server: no reply queued)" so a test
never hangs. The server runs uvicorn in a thread of its own and stops on exit.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from tests.fakes.threaded import DropConnection, FakeModelServer

MODEL = "fake-model"


@dataclass
class StreamReply:
    """An SSE answer. A dict chunk is sent as JSON, a str chunk verbatim (e.g. garbage)."""

    chunks: list[dict[str, Any] | str]
    end: Literal["done", "eof", "drop"] = "done"
    """done: `data: [DONE]`; eof: close cleanly without it; drop: abort the connection."""
    delay: float = 0.0
    """Seconds before the first chunk (first-token timeouts)."""
    chunk_delay: float = 0.0


@dataclass
class ErrorReply:
    status: int
    message: str
    code: str | None = None
    type: str = "invalid_request_error"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class WholeReply:
    """A `chat.completion` body sent as it is, for a request with `stream` off."""

    body: dict[str, Any]


Reply = StreamReply | ErrorReply | WholeReply


def chunk(
    *,
    content: str | None = None,
    reasoning_content: str | None = None,
    reasoning: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str | None = None,
    usage: tuple[int, int] | None = None,
    role: str | None = None,
) -> dict[str, Any]:
    """One `chat.completion.chunk`; a usage chunk (usage given, nothing else) has no choices."""
    delta: dict[str, Any] = {}
    for key, value in (
        ("role", role),
        ("content", content),
        ("reasoning_content", reasoning_content),
        ("reasoning", reasoning),
        ("tool_calls", tool_calls),
    ):
        if value is not None:
            delta[key] = value
    body: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": MODEL,
        "choices": [],
    }
    if delta or finish_reason is not None or usage is None:
        body["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
    if usage is not None:
        body["usage"] = {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": usage[0] + usage[1],
        }
    return body


def tool_fragment(
    index: int, *, id: str | None = None, name: str | None = None, arguments: str = ""
) -> dict[str, Any]:
    function: dict[str, Any] = {"arguments": arguments}
    if name is not None:
        function["name"] = name
    fragment: dict[str, Any] = {"index": index, "function": function}
    if id is not None:
        fragment.update(id=id, type="function")
    return fragment


def words(text: str) -> list[str]:
    parts = text.split(" ")
    return [part + " " for part in parts[:-1]] + [parts[-1]]


def text_reply(
    text: str,
    *,
    reasoning: str = "",
    reasoning_field: Literal["reasoning_content", "reasoning"] = "reasoning_content",
    usage: tuple[int, int] | None = (12, 7),
    finish_reason: str = "stop",
) -> StreamReply:
    """Reasoning and text word by word, the finish, then a usage chunk."""
    chunks: list[dict[str, Any] | str] = [chunk(role="assistant", content="")]
    if reasoning:
        for part in words(reasoning):
            if reasoning_field == "reasoning":
                chunks.append(chunk(reasoning=part))
            else:
                chunks.append(chunk(reasoning_content=part))
    if text:
        chunks += [chunk(content=part) for part in words(text)]
    chunks.append(chunk(finish_reason=finish_reason))
    if usage is not None:
        chunks.append(chunk(usage=usage))
    return StreamReply(chunks)


def tool_call_reply(
    calls: Sequence[tuple[str, dict[str, Any] | str]],
    *,
    text: str = "",
    usage: tuple[int, int] | None = (20, 9),
) -> StreamReply:
    """Parallel tool calls whose argument fragments arrive interleaved across indexes."""
    chunks: list[dict[str, Any] | str] = [chunk(role="assistant", content=text or None)]
    raws = [args if isinstance(args, str) else json.dumps(args) for _, args in calls]
    for index, (name, _) in enumerate(calls):
        chunks.append(chunk(tool_calls=[tool_fragment(index, id=f"call_{index}", name=name)]))
    # Three fragments per call, round-robin: 0a 1a 0b 1b 0c 1c.
    pieces = [[raw[: len(raw) // 3], raw[len(raw) // 3 : 2 * len(raw) // 3]] for raw in raws]
    for index, raw in enumerate(raws):
        pieces[index].append(raw[2 * len(raw) // 3 :])
    for step in range(3):
        for index in range(len(calls)):
            fragment = tool_fragment(index, arguments=pieces[index][step])
            chunks.append(chunk(tool_calls=[fragment]))
    chunks.append(chunk(finish_reason="tool_calls"))
    if usage is not None:
        chunks.append(chunk(usage=usage))
    return StreamReply(chunks)


def error_reply(status: int, message: str | None = None, **kwargs: Any) -> ErrorReply:
    """An HTTP error with OpenAI's body shape and a message like OpenAI's own."""
    defaults = {
        401: "Incorrect API key provided.",
        404: f"The model `{MODEL}` does not exist or you do not have access to it.",
        429: "Rate limit reached for requests.",
        500: "The server had an error while processing your request.",
    }
    return ErrorReply(status, message or defaults.get(status, f"HTTP {status}"), **kwargs)


def request_tokens(body: dict[str, Any]) -> int:
    """The fake's tokenizer: characters / 4 of the request's messages and tools as JSON
    (stricter than Burrow's estimate, which does not count the JSON around them)."""
    return len(json.dumps(body.get("messages", [])) + json.dumps(body.get("tools", []))) // 4


def context_length_error(window: int, tokens: int) -> ErrorReply:
    """What OpenAI answers to a request over the model's window (400, code and message as
    the API sends them)."""
    return ErrorReply(
        400,
        f"This model's maximum context length is {window} tokens. However, your messages "
        f"resulted in {tokens} tokens. Please reduce the length of the messages.",
        code="context_length_exceeded",
    )


class FakeOpenAIServer(FakeModelServer[Reply]):
    """`api_key`: answer 401 unless the request carries it. `models`: answer 404 for others.
    `context_window`: reject a request over that many tokens (`request_tokens`) as OpenAI
    does, and report each answer's prompt tokens by that count. `responder`: chooses each
    reply from the request body before the queue (None: the queue's next)."""

    thread_name = "fake-openai"

    def __init__(
        self,
        *,
        api_key: str | None = None,
        models: set[str] | None = None,
        context_window: int | None = None,
        responder: Callable[[dict[str, Any]], Reply | None] | None = None,
    ) -> None:
        super().__init__()
        self.api_key = api_key
        self.models = models
        self.context_window = context_window
        self.responder = responder
        self.clients: list[int | None] = []  # each completion request's client port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/v1/chat/completions", self._complete, methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"]),
        ]

    async def _models(self, request: Request) -> Response:
        given = request.headers.get("authorization", "")
        if self.api_key is not None and given != f"Bearer {self.api_key}":
            error = {"message": "Incorrect API key provided.", "type": "invalid_request_error"}
            return JSONResponse({"error": error}, 401)
        names = sorted(self.models or {MODEL})
        data = [{"id": n, "object": "model", "created": 0, "owned_by": "fake"} for n in names]
        return JSONResponse({"object": "list", "data": data})

    async def _complete(self, request: Request) -> Response:
        body = await request.json()
        with self._lock:
            self.requests.append(body)
            self.headers.append(dict(request.headers))
            self.clients.append(request.client.port if request.client else None)
            reply = None if self.responder is None else self.responder(body)
            if reply is None and self._replies:
                reply = self._replies.popleft()
        tokens = request_tokens(body)
        given = request.headers.get("authorization", "")
        if self.api_key is not None and given != f"Bearer {self.api_key}":
            # Echo the key back, as careless servers do, so redaction can be tested.
            reply = error_reply(401, f"Incorrect API key provided: {given.removeprefix('Bearer ')}")
        elif self.models is not None and body.get("model") not in self.models:
            message = f"The model `{body.get('model')}` does not exist."
            reply = error_reply(404, message, code="model_not_found")
        elif self.context_window is not None and tokens > self.context_window:
            reply = context_length_error(self.context_window, tokens)
        if reply is None:
            reply = text_reply("(fake server: no reply queued)")
        if self.context_window is not None and isinstance(reply, StreamReply):
            reply = with_prompt_tokens(reply, tokens)
        if isinstance(reply, ErrorReply):
            error = {
                "message": reply.message,
                "type": reply.type,
                "param": None,
                "code": reply.code,
            }
            if reply.code == "context_length_exceeded":
                error["param"] = "messages"
            return JSONResponse({"error": error}, reply.status, headers=reply.headers)
        if isinstance(reply, WholeReply):
            return JSONResponse(reply.body)
        return StreamingResponse(_sse(reply), media_type="text/event-stream")


def with_prompt_tokens(reply: StreamReply, tokens: int) -> StreamReply:
    """`reply` with its usage chunk counting `tokens` prompt tokens."""
    chunks: list[dict[str, Any] | str] = []
    for item in reply.chunks:
        if isinstance(item, dict) and "usage" in item:
            item = {**item, "usage": {**item["usage"], "prompt_tokens": tokens}}
            item["usage"]["total_tokens"] = tokens + item["usage"]["completion_tokens"]
        chunks.append(item)
    return replace(reply, chunks=chunks)


async def _sse(reply: StreamReply) -> AsyncIterator[bytes]:
    if reply.delay:
        await asyncio.sleep(reply.delay)
    for item in reply.chunks:
        data = item if isinstance(item, str) else json.dumps(item)
        yield f"data: {data}\n\n".encode()
        if reply.chunk_delay:
            await asyncio.sleep(reply.chunk_delay)
    if reply.end == "drop":
        raise DropConnection
    if reply.end == "done":
        yield b"data: [DONE]\n\n"
