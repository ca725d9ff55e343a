"""An SSE response whose live events the journal's fan-out can write itself.

With a thousand clients on one conversation, waking each client's task to write one frame
costs more than the write (DESIGN.md §7: commit -> client p50 <= 5 ms at 1,000 clients).
So while a client is caught up, `write_now` sends its frame synchronously from the fan-out:
the ASGI `send` is run without a task and counts only if it finishes without suspending.
A `send` that would wait (the socket's buffer is full: uvicorn waits for it to drain
before it writes anything) is abandoned unstarted, and the client's own task writes that
frame and the rest, awaiting like any stream.

A client that stops reading altogether is dropped: when one write waits longer than
`stall_seconds` the response fails with `ClientStalled`, and the server closes the
connection. Meanwhile the journal holds at most its subscriber buffer for it, and once
dropped, nothing; it reconnects with `Last-Event-ID` and resumes from the journal.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, cast

from starlette.types import Message, Send

from burrow.api.streams import HeldStreamingResponse, StreamSlot
from burrow.store.records import Event

WriteNow = Callable[[Event], bool]


class ClientStalled(Exception):
    """The client took none of a write for `seconds`: it is dropped."""

    def __init__(self, seconds: float) -> None:
        super().__init__(
            f"dropped an event stream whose client read nothing for {seconds:g} s "
            "(BURROW_STREAM_STALL_SECONDS); it resumes with Last-Event-ID"
        )


def stall_guarded(send: Send, seconds: float) -> Send:
    """`send`, failing with `ClientStalled` when one write waits more than `seconds`."""

    async def guarded(message: Message) -> None:
        try:
            async with asyncio.timeout(seconds):
                await send(message)
        except TimeoutError:
            raise ClientStalled(seconds) from None

    return guarded


class StalledClientLog(logging.Filter):
    """A failed response is logged with a traceback, by the app's error handler and again
    by the server ("Exception in ASGI application"). A dropped client is expected: the
    server's record becomes one line at warning level, the handler's goes."""

    def __init__(self, *, keep: bool) -> None:
        super().__init__()
        self._keep = keep

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, ClientStalled):
            return True
        record.msg, record.args, record.exc_info, record.exc_text = str(exc), None, None, None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return self._keep


# One instance each: adding the same filter twice is a no-op.
_SERVER_LOG, _HANDLER_LOG = StalledClientLog(keep=True), StalledClientLog(keep=False)


def quiet_stalled_clients() -> None:
    logging.getLogger("uvicorn.error").addFilter(_SERVER_LOG)
    logging.getLogger("burrow.api.errors").addFilter(_HANDLER_LOG)


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

    def __init__(
        self,
        body: Callable[[WriteNow], AsyncIterator[bytes]],
        slot: StreamSlot,
        stall_seconds: float,
    ) -> None:
        super().__init__(
            _never(),
            slot,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self._body = body
        self._stall_seconds = stall_seconds

    async def stream_response(self, send: Send) -> None:
        # `write_now` never waits, so only the task's own writes need the guard.
        self.body_iterator = self._body(write_now(send))
        await super().stream_response(stall_guarded(send, self._stall_seconds))


async def _never() -> AsyncIterator[bytes]:
    return
    yield
