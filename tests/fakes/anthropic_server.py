"""A real Anthropic Messages-API server on 127.0.0.1 that streams scripted replies.

    with FakeAnthropicServer() as srv:
        srv.enqueue(message([text("Hello!")]), overloaded())
        provider = AnthropicProvider("claude-test", "sk-ant-test", srv.base_url)

Replies speak the real SSE shapes: `message_start` (usage with cache counts), a `ping`,
per block `content_block_start` / `content_block_delta` (text_delta, input_json_delta,
thinking_delta, signature_delta) / `content_block_stop`, `message_delta` (stop reason and
output tokens), `message_stop`; errors as HTTP bodies or as an `error` event mid-stream.
With no reply queued it answers "(fake server: no reply queued)" so a test never hangs.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from tests.fakes.threaded import DropConnection, FakeModelServer

MODEL = "claude-test"
CREATED = "2025-01-01T00:00:00Z"


@dataclass
class Block:
    """One content block: its start, then its deltas."""

    start: dict[str, Any]
    deltas: list[dict[str, Any]] = field(default_factory=list)


def text(value: str) -> Block:
    words = value.split(" ")
    parts = [w + " " for w in words[:-1]] + [words[-1]]
    return Block(
        {"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in parts if p]
    )


def tool_use(id: str, name: str, arguments: dict[str, Any]) -> Block:
    raw = json.dumps(arguments)
    cut = len(raw) // 2  # two fragments, the way the API streams partial JSON
    return Block(
        {"type": "tool_use", "id": id, "name": name, "input": {}},
        [
            {"type": "input_json_delta", "partial_json": raw[:cut]},
            {"type": "input_json_delta", "partial_json": raw[cut:]},
        ],
    )


def thinking(value: str, signature: str) -> Block:
    half = len(value) // 2
    return Block(
        {"type": "thinking", "thinking": "", "signature": ""},
        [
            {"type": "thinking_delta", "thinking": value[:half]},
            {"type": "thinking_delta", "thinking": value[half:]},
            {"type": "signature_delta", "signature": signature},
        ],
    )


def redacted(data: str) -> Block:
    return Block({"type": "redacted_thinking", "data": data})


@dataclass
class StreamReply:
    events: list[tuple[str, dict[str, Any]]]
    end: Literal["eof", "drop", "hang"] = "eof"
    """eof: close after the events; drop: abort the connection; hang: keep it open and
    send nothing more (a stalled stream)."""
    delay: float = 0.0
    """Seconds before the first event (first-token timeouts)."""


@dataclass
class ErrorReply:
    status: int
    type: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)


Reply = StreamReply | ErrorReply


def message(
    blocks: list[Block],
    *,
    stop_reason: str | None = None,
    usage: tuple[int, int] = (25, 12),
    cache: tuple[int, int] = (0, 0),
    stop_after: int | None = None,
    end: Literal["eof", "drop", "hang"] = "eof",
    error: tuple[str, str] | None = None,
) -> StreamReply:
    """A whole streamed message. `usage`: (input, output) tokens; `cache`: (written, read).

    `stop_after`: send only that many events, then `end` (a stall or a drop mid-answer);
    `error`: (type, message) of an `error` event in place of the end of the message.
    """
    if stop_reason is None:
        stop_reason = (
            "tool_use" if any(b.start["type"] == "tool_use" for b in blocks) else ("end_turn")
        )
    start_usage = {
        "input_tokens": usage[0],
        "output_tokens": 1,
        "cache_creation_input_tokens": cache[0],
        "cache_read_input_tokens": cache[1],
    }
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_fake",
                    "type": "message",
                    "role": "assistant",
                    "model": MODEL,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": start_usage,
                },
            },
        ),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(blocks):
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": block.start},
            )
        )
        for delta in block.deltas:
            events.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    if error is not None:
        kind, said = error
        events.append(("error", {"type": "error", "error": {"type": kind, "message": said}}))
        return StreamReply(events)
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": usage[1]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    if stop_after is not None:
        return StreamReply(events[:stop_after], end=end)
    return StreamReply(events, end=end)


def overloaded(retry_after: str | None = None) -> ErrorReply:
    headers = {"retry-after": retry_after} if retry_after else {}
    return ErrorReply(529, "overloaded_error", "Overloaded", headers)


def rate_limited(retry_after: str = "1") -> ErrorReply:
    message = "Number of request tokens has exceeded your per-minute rate limit"
    return ErrorReply(429, "rate_limit_error", message, {"retry-after": retry_after})


def prompt_too_long() -> ErrorReply:
    return ErrorReply(
        400, "invalid_request_error", "prompt is too long: 212345 tokens > 200000 maximum"
    )


def given_key(headers: Mapping[str, str]) -> str:
    """The key a request carries: `x-api-key`, or a bearer token (newer SDKs send that)."""
    return headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")


class FakeAnthropicServer(FakeModelServer[Reply]):
    """`api_key`: requests without it get 401 authentication_error."""

    thread_name = "fake-anthropic"

    def __init__(self, *, api_key: str | None = None, models: list[str] | None = None) -> None:
        super().__init__()
        self.api_key = api_key
        self.models = models or [MODEL]
        self.raw_requests: list[bytes] = []  # the requests as the bytes that came over the wire

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/v1/messages", self._messages, methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"]),
        ]

    def _refused(self, request: Request) -> Response | None:
        if self.api_key is None or given_key(request.headers) == self.api_key:
            return None
        error = {"type": "authentication_error", "message": "invalid x-api-key"}
        return JSONResponse({"type": "error", "error": error}, 401)

    async def _models(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        data = [
            {
                "type": "model",
                "id": name,
                "display_name": name,
                "created_at": "2025-01-01T00:00:00Z",
            }
            for name in self.models
        ]
        return JSONResponse(
            {"data": data, "has_more": False, "first_id": data[0]["id"], "last_id": data[-1]["id"]}
        )

    async def _messages(self, request: Request) -> Response:
        raw = await request.body()
        with self._lock:
            self.raw_requests.append(raw)
            self.requests.append(json.loads(raw))
            self.headers.append(dict(request.headers))
            reply = self._replies.popleft() if self._replies else None
        refused = self._refused(request)
        if refused is not None:
            return refused
        if reply is None:
            reply = message([text("(fake server: no reply queued)")])
        if isinstance(reply, ErrorReply):
            error = {"type": reply.type, "message": reply.message}
            body = {"type": "error", "error": error}
            return JSONResponse(body, reply.status, headers=reply.headers)
        return StreamingResponse(_sse(reply), media_type="text/event-stream")


async def _sse(reply: StreamReply) -> AsyncIterator[bytes]:
    if reply.delay:
        await asyncio.sleep(reply.delay)
    for name, data in reply.events:
        yield f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
    if reply.end == "drop":
        raise DropConnection
    if reply.end == "hang":
        await asyncio.sleep(3600)  # cancelled when the client goes away or the server stops
