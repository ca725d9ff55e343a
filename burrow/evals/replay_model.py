"""A fake OpenAI-compatible server that replays the suite's scripts with a real model's
shape: the time to the first token, a steady token rate, jitter. `burrow eval --model replay`
runs the suite through Burrow's real OpenAI provider (streaming, tool calls, retries) against
it — the path a real model takes — where no real model is reachable (CI, the docs' example).

The shape is a model, not a recording: `Shape`'s defaults are typical of a hosted frontier
model (about 0.8 s to the first token, 60 tokens a second); tokens are counted as the
scripted provider counts them (characters / 4).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from burrow.llm.base import (
    Done,
    Message,
    ModelError,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from burrow.llm.scripted import RoutedScripts

MODEL = "replay"


@dataclass(frozen=True)
class Shape:
    first_token_s: float = 0.8
    tokens_per_s: float = 60.0
    jitter: float = 0.25  # each wait varies by up to this share, either way
    seed: int = 7
    prompt_price: float = 2.0  # dollars per million tokens, as gpt-4.1's list prices
    completion_price: float = 8.0

    def describe(self) -> str:
        return (
            f"{self.first_token_s:g} s to first token, {self.tokens_per_s:g} tokens/s, "
            f"${self.prompt_price:g}/${self.completion_price:g} per M tokens"
        )


def replay_app(scripts: RoutedScripts, shape: Shape = Shape()) -> Starlette:
    chance = random.Random(shape.seed)

    def wait(seconds: float) -> float:
        return max(0.0, seconds * (1 + chance.uniform(-shape.jitter, shape.jitter)))

    async def completions(request: Request) -> Response:
        body = await request.json()
        messages = [_message(m) for m in body.get("messages", [])]
        try:
            events = [e async for e in scripts.stream(messages, [])]
        except ModelError as exc:
            error = {"error": {"message": exc.message, "type": "invalid_request_error"}}
            return JSONResponse(error, status_code=400)
        return StreamingResponse(_paced(events, wait, shape), media_type="text/event-stream")

    async def models(_: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    return Starlette(
        routes=[
            Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
        ]
    )


async def _paced(events: Sequence[object], wait: Any, shape: Shape) -> AsyncIterator[bytes]:
    await asyncio.sleep(wait(shape.first_token_s))
    usage = next((e for e in events if isinstance(e, Usage)), Usage())
    finish = next((e.finish_reason for e in events if isinstance(e, Done)), "stop")
    for event in events:
        delta: dict[str, Any] = {}
        if isinstance(event, TextDelta):
            delta = {"content": event.text}
        elif isinstance(event, ThinkingDelta):
            delta = {"reasoning_content": event.text}
        elif isinstance(event, ToolCallDelta):
            call: dict[str, Any] = {"index": event.index, "function": {}}
            if event.id:
                call.update(id=event.id, type="function")
            if event.name:
                call["function"]["name"] = event.name
            call["function"]["arguments"] = event.arguments
            delta = {"tool_calls": [call]}
        else:
            continue
        size = len(json.dumps(delta)) / 4  # the tokens this piece stands for
        await asyncio.sleep(wait(size / shape.tokens_per_s))
        yield _chunk({"index": 0, "delta": delta, "finish_reason": None})
    yield _chunk({"index": 0, "delta": {}, "finish_reason": finish})
    tokens = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    }
    yield _chunk(None, tokens)
    yield b"data: [DONE]\n\n"


def _chunk(choice: dict[str, Any] | None, usage: dict[str, int] | None = None) -> bytes:
    body: dict[str, Any] = {
        "id": "chatcmpl-replay",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": MODEL,
        "choices": [choice] if choice else [],
    }
    if usage:
        body["usage"] = usage
    return f"data: {json.dumps(body)}\n\n".encode()


def _message(raw: dict[str, Any]) -> Message:
    content = raw.get("content") or ""
    if isinstance(content, list):  # content parts: keep the text
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    calls = tuple(
        ToolCall(str(c.get("id", "")), str(c["function"]["name"]), c["function"]["arguments"])
        for c in raw.get("tool_calls") or []
    )
    role = raw.get("role", "user")
    if role not in ("system", "user", "assistant", "tool"):
        role = "system"  # "developer" and the like
    return Message(role=role, content=str(content), tool_calls=calls)
