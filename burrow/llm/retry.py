"""Try a model call again when the failure is transient and nothing was shown yet."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Sequence

from burrow.llm.base import (
    Done,
    Message,
    ModelError,
    Provider,
    Retry,
    StreamEvent,
    ToolSpec,
    Usage,
)

log = logging.getLogger(__name__)

KEPT = "The answer so far is kept; send a message to continue."


class RetryingProvider:
    """Retries retryable `ModelError`s with exponential backoff and jitter, honouring the
    server's Retry-After up to `max_retry_after`. Each retry is announced with a `Retry`
    event before the wait, so the user sees why nothing is happening.

    Once part of the answer has reached the caller it is committed: a later failure is
    raised, saying that what was shown is kept, because replaying would show the user
    (and the journal) a second copy.
    """

    def __init__(
        self,
        inner: Provider,
        attempts: int = 4,
        base_delay: float = 1.0,
        max_delay: float = 30.0,
        max_retry_after: float = 60.0,
    ) -> None:
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        self.inner = inner
        self.name = inner.name
        self.attempts = attempts
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.max_retry_after = max_retry_after

    def delay(self, attempt: int, error: ModelError) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        backoff = min(self.max_delay, self.base_delay * 2.0 ** (attempt - 1))
        backoff *= random.uniform(0.5, 1.0)  # jitter: many clients must not retry in step
        if error.retry_after is not None:
            backoff = max(backoff, min(error.retry_after, self.max_retry_after))
        return backoff

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        max_tokens: int | None = None,
    ) -> AsyncIterator[StreamEvent]:
        for attempt in range(1, self.attempts + 1):
            shown = False
            answer = self.inner.stream(messages, tools, max_tokens)
            try:
                async for event in answer:
                    shown = shown or not isinstance(event, Usage | Retry | Done)
                    yield event
                return
            except ModelError as exc:
                if shown:
                    raise ModelError(
                        f"{exc.message} {KEPT}", retry_after=exc.retry_after, code=exc.code
                    ) from exc
                if not exc.retryable:
                    raise
                if attempt == self.attempts:
                    raise ModelError(
                        f"{exc.message} (gave up after {attempt} attempts)",
                        retryable=True,
                        retry_after=exc.retry_after,
                        code=exc.code,
                    ) from exc
                wait = self.delay(attempt, exc)
                log.warning(
                    "model call failed (attempt %d of %d), retrying in %.1f s: %s",
                    attempt,
                    self.attempts,
                    wait,
                    exc.message,
                )
                yield Retry(attempt=attempt, delay_s=round(wait, 3), reason=exc.message)
                await asyncio.sleep(wait)
            finally:
                await close(answer)


async def close(stream: AsyncIterator[StreamEvent]) -> None:
    """Close an abandoned stream now (its HTTP response with it), not whenever GC runs."""
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()
