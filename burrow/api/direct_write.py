"""Writing a batch of events to a caught-up SSE client from the journal's fan-out itself.

With a thousand clients on one conversation, each event costs one write per client, and
whatever runs around that write runs a thousand times (DESIGN.md §7: commit -> client
p50 <= 5 ms at 1,000 clients). So a caught-up client gets its frames written synchronously
by the fan-out (no task wake-up), the batch's bytes encoded once for all clients, and, under
uvicorn, straight onto the connection's transport, past the ASGI `send` chain: that chain
(five middlewares and the server's `send`, a coroutine each) cost twice the write itself.

A writer returns False when it wrote nothing because the write would have to wait (the
socket's buffer is above its high-water mark) or the connection is going away; the
client's own task then writes that batch and the rest, awaiting like any stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any, cast

from starlette.types import Message, Scope, Send
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from burrow.runs.journal.journal import DirectWrite
from burrow.store.records import Event

WriteNow = DirectWrite  # one batch of consecutive events, or nothing (False)

# The scope extension under which the app keeps the server's own `send` (api/app.py).
SERVER_SEND = "burrow.server_send"


class _SharedBody:
    """The body of the batch being fanned out, encoded once however many clients get it.
    The fan-out hands every subscriber the same sequence object; holding on to it keeps its
    identity from being reused by a later batch. Only the form a writer asks for is built
    (one server takes one of them), each in one join: a batch can be megabytes (a long
    answer), and every copy of it is held until the next batch."""

    def __init__(self) -> None:
        self._batch: Sequence[Event] = ()
        self._body: bytes | None = None
        self._chunk: bytes | None = None

    def body(self, batch: Sequence[Event]) -> bytes:
        self._switch(batch)
        if self._body is None:
            self._body = b"".join(e.sse_frame for e in batch)
        return self._body

    def chunk(self, batch: Sequence[Event]) -> bytes:
        """The body as one HTTP/1.1 chunk (`transfer-encoding: chunked`)."""
        self._switch(batch)
        if self._chunk is None:
            frames = [e.sse_frame for e in batch]
            size = sum(len(frame) for frame in frames)
            self._chunk = b"".join((b"%x\r\n" % size, *frames, b"\r\n"))
        return self._chunk

    def _switch(self, batch: Sequence[Event]) -> None:
        if batch is not self._batch:
            self._batch, self._body, self._chunk = batch, None, None


_shared = _SharedBody()


def write_now(scope: Scope, send: Send) -> WriteNow:
    """The fastest way this server offers to write without waiting."""
    server_send = scope.get("extensions", {}).get(SERVER_SEND)
    return _transport_writer(server_send) or _asgi_writer(send)


def _transport_writer(server_send: object) -> WriteNow | None:
    """Under uvicorn's httptools protocol (Burrow's server), a writer that puts the chunk on
    the connection's transport itself."""
    cycle = getattr(server_send, "__self__", None)
    if not isinstance(cycle, RequestResponseCycle):
        return None  # another server (or h11): the ASGI path below
    return _TransportWriter(cycle.transport)


class _TransportWriter:
    """Writes where uvicorn's own `send` would write without waiting: below the transport's
    high-water mark (above it uvicorn pauses), so a stalled client's buffer stays bounded.
    Only what changes while the stream is open is checked: the fan-out calls it only
    mid-body of a chunked response (after the stream's first chunk, before its last).
    It touches nothing but the transport: with a thousand clients, every object read per
    client is a cache miss that costs as much as the rest of the write."""

    __slots__ = ("_high_water", "_transport")

    def __init__(self, transport: asyncio.WriteTransport) -> None:
        self._transport = transport
        self._high_water = transport.get_write_buffer_limits()[1]

    def __call__(self, batch: Sequence[Event]) -> bool:
        transport = self._transport
        if transport.is_closing() or transport.get_write_buffer_size() > self._high_water:
            return False
        transport.write(_shared.chunk(batch))
        return True


def _asgi_writer(send: Send) -> WriteNow:
    """A writer through the ASGI `send`: run without a task, it counts only if it finishes
    without suspending. A `send` that would wait is abandoned unstarted."""

    def write(batch: Sequence[Event]) -> bool:
        message: Message = {
            "type": "http.response.body",
            "body": _shared.body(batch),
            "more_body": True,
        }
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
