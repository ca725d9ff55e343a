"""An SSE response whose live events the journal's fan-out can write itself.

While a client is caught up, its events are written synchronously by the fan-out (see
`burrow.api.direct_write`); when that cannot write without waiting (the socket's buffer is
full), the client's own task writes that batch and the rest, awaiting like any stream.

A client that stops reading altogether is dropped: when one write waits longer than
`stall_seconds` the response fails with `ClientStalled`, and the server closes the
connection. Meanwhile the journal holds at most its subscriber buffer for it, and once
dropped, nothing; it reconnects with `Last-Event-ID` and resumes from the journal.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable

from starlette.types import Message, Receive, Scope, Send

from burrow.api.direct_write import WriteNow, write_now
from burrow.api.streams import HeldStreamingResponse, StreamSlot


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
        self._scope: Scope = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._scope = scope  # where the server may offer a faster write (direct_write.py)
        await super().__call__(scope, receive, send)

    async def stream_response(self, send: Send) -> None:
        # `write_now` never waits, so only the task's own writes need the guard.
        self.body_iterator = self._body(write_now(self._scope, send))
        await super().stream_response(stall_guarded(send, self._stall_seconds))


async def _never() -> AsyncIterator[bytes]:
    return
    yield
