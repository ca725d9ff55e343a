"""Deadlines on a model stream: one for the first token, one for every silence after it.

A server that accepts the request and then says nothing, or stops in the middle of an
answer, would otherwise hold a run forever. Both failures are retryable; whether a retry
happens is `RetryingProvider`'s call, which knows whether anything was shown.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass

from burrow.llm.base import Done, ModelError, StreamEvent, Usage


@dataclass(frozen=True)
class StallLimits:
    first_token: float = 180.0
    """Seconds from the request to the first thinking, text or tool-call fragment
    (BURROW_MODEL_FIRST_TOKEN_TIMEOUT): a long prompt on a busy server takes a while."""
    idle: float = 120.0
    """Seconds the stream may stay silent once the answer began (BURROW_MODEL_IDLE_TIMEOUT)."""


async def guard(
    events: AsyncIterator[StreamEvent], limits: StallLimits, where: str
) -> AsyncGenerator[StreamEvent, None]:
    """`events`, failing with a retryable `ModelError` when a deadline passes."""
    started = False
    try:
        while True:
            limit = limits.idle if started else limits.first_token
            try:
                async with asyncio.timeout(limit) as deadline:
                    event = await anext(events)
            except StopAsyncIteration:
                return
            except TimeoutError as exc:
                if not deadline.expired():
                    raise
                raise stalled(where, limit, started=started) from exc
            # Usage and the end are bookkeeping, not the model producing something.
            started = started or not isinstance(event, Usage | Done)
            yield event
    finally:
        await events.aclose()  # type: ignore[attr-defined]


def stalled(where: str, seconds: float, *, started: bool) -> ModelError:
    if not started:
        return ModelError(
            f"The model server at {where} sent nothing for {seconds:g} s: it may be "
            "overloaded. Try again.",
            retryable=True,
        )
    return ModelError(
        f"The model stream stalled: the server at {where} sent nothing for {seconds:g} s "
        "in the middle of the answer (limit: BURROW_MODEL_IDLE_TIMEOUT).",
        retryable=True,
    )
