"""Try a model call again when the failure is transient and nothing was shown yet."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Sequence

from burrow.llm.base import Message, ModelError, Provider, StreamEvent, ToolSpec

log = logging.getLogger(__name__)


class RetryingProvider:
    """Retries retryable `ModelError`s with exponential backoff and jitter.

    Once an event has reached the caller the answer is committed: a later failure is
    raised as is, because replaying would show the user (and the journal) a second copy.
    """

    def __init__(
        self,
        inner: Provider,
        attempts: int = 3,
        base_delay: float = 0.5,
        max_delay: float = 8.0,
    ) -> None:
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        self.inner = inner
        self.name = inner.name
        self.attempts = attempts
        self.base_delay = base_delay
        self.max_delay = max_delay

    def delay(self, attempt: int, error: ModelError) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        backoff = min(self.max_delay, self.base_delay * 2.0 ** (attempt - 1))
        backoff *= random.uniform(0.5, 1.0)  # jitter: many clients must not retry in step
        if error.retry_after is not None:
            backoff = max(backoff, min(error.retry_after, self.max_delay))
        return backoff

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AsyncIterator[StreamEvent]:
        for attempt in range(1, self.attempts + 1):
            yielded = False
            answer = self.inner.stream(messages, tools)
            try:
                async for event in answer:
                    yielded = True
                    yield event
                return
            except ModelError as exc:
                if yielded or not exc.retryable:
                    raise
                if attempt == self.attempts:
                    raise ModelError(
                        f"{exc.message} (gave up after {attempt} attempts)",
                        retryable=True,
                        retry_after=exc.retry_after,
                    ) from exc
                wait = self.delay(attempt, exc)
                log.warning(
                    "model call failed (attempt %d of %d), retrying in %.1f s: %s",
                    attempt,
                    self.attempts,
                    wait,
                    exc.message,
                )
                await asyncio.sleep(wait)
            finally:
                await close(answer)


async def close(stream: AsyncIterator[StreamEvent]) -> None:
    """Close an abandoned stream now (its HTTP response with it), not whenever GC runs."""
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()
