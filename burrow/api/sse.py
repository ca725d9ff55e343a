"""An SSE response whose live events the journal's fan-out can write itself.

With a thousand clients on one conversation, waking each client's task to write one frame
costs more than the write (DESIGN.md §7: commit -> client p50 <= 5 ms at 1,000 clients).
So while a client is caught up, `write_now` sends its frame synchronously from the fan-out:
the ASGI `send` is run without a task and counts only if it finishes without suspending.
A `send` that would wait (the socket's buffer is full: uvicorn waits for it to drain
before it writes anything) is abandoned unstarted, and the client's own task writes that
frame and the rest, awaiting like any stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, cast

from starlette.types import Send

from burrow.api.streams import HeldStreamingResponse, StreamSlot
from burrow.store.records import Event

WriteNow = Callable[[Event], bool]


def write_now(send: Send) -> WriteNow:
    def write(event: Event) -> bool:
        message = {"type": "http.response.body", "body": event.sse_frame, "more_body": True}
        # Every ASGI server's and middleware's `send` is a coroutine function.
        step = cast(Coroutine[Any, Any, None], send(message))
        try:
            step.send(None)
        except StopIteration:
            return True
        except Exception:
            return False  # the client's task meets the same error on its own write
        step.close()
        return False

    return write


class EventStreamResponse(HeldStreamingResponse):
    """`body(write_now)` yields the frames its task writes; `write_now` writes the others."""

    def __init__(self, body: Callable[[WriteNow], AsyncIterator[bytes]], slot: StreamSlot) -> None:
        super().__init__(
            _never(),
            slot,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self._body = body

    async def stream_response(self, send: Send) -> None:
        self.body_iterator = self._body(write_now(send))
        await super().stream_response(send)


async def _never() -> AsyncIterator[bytes]:
    return
    yield
