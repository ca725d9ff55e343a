"""Open streams: an SSE event stream, a terminal socket or an A2A `message/stream` holds a
connection, a file descriptor, for as long as its client likes.

Two invariants. Streams never take the descriptors the rest of the server needs: there is
a cap per user (`BURROW_MAX_STREAMS_PER_USER`) and one for all users, both derived from the
process's open-file limit (`stream_limits`). And a stream lives no longer than the
credential it was opened with: logging out, a password change, disabling an account and
the server's shutdown end the streams concerned at once (`StreamCap.end`), where a stream
would otherwise outlive its session for as long as the client keeps it open.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from dataclasses import dataclass

import anyio
from fastapi.responses import StreamingResponse
from starlette.types import Message, Receive, Scope, Send

from burrow import descriptors
from burrow.api.errors import ApiError

# Terminal socket refused because the user is at the cap: 4000 + the HTTP status (429), like
# the other close codes (4401, 4403, 4404).
CLOSE_TOO_MANY_STREAMS = 4429


@dataclass(frozen=True)
class Ending:
    """Why open streams were ended: the close code a terminal socket gets, and its reason."""

    code: int
    reason: str


SIGNED_OUT = Ending(4401, "signed out: log in again")
SHUTTING_DOWN = Ending(1001, "the server is shutting down")


def stream_limits(per_user: int, open_files: int) -> tuple[int, int]:
    """(per user, for all users) when the process may hold `open_files` descriptors: all
    streams together get half of what the reserve leaves, one user at most half of that,
    so neither one account nor all of them can leave the server without descriptors."""
    total = max(2, (open_files - descriptors.RESERVED) // 2)
    return (min(per_user, total // 2) if per_user else 0), total


class TooManyStreams(Exception):
    def __init__(self, limit: int, *, everyone: bool = False) -> None:
        self.everyone = everyone
        if everyone:
            super().__init__(
                f"The server has {limit} event streams and terminal sockets open, all its "
                "open-file limit allows: try again in a moment (operators: raise the hard "
                "limit, e.g. LimitNOFILE= or ulimit -Hn)."
            )
            self.close_reason = "the server has too many open streams: try again in a moment"
            return
        super().__init__(
            f"You already have {limit} event streams and terminal sockets open (the limit, "
            "BURROW_MAX_STREAMS_PER_USER): close some tabs or terminals and try again."
        )
        # A WebSocket close reason holds at most 123 bytes.
        self.close_reason = (
            f"too many open streams (BURROW_MAX_STREAMS_PER_USER={limit}): close a tab or terminal"
        )

    def api_error(self) -> ApiError:
        if self.everyone:
            return ApiError(503, "server_busy", str(self), {"Retry-After": "5"})
        return ApiError(429, "too_many_streams", str(self), {"Retry-After": "5"})


class StreamCap:
    def __init__(self, limit: int, total: int = 0) -> None:
        self.limit = limit  # per user; 0: no cap
        self.total = total  # for all users; 0: no cap
        self._open: Counter[str] = Counter()
        self._slots: set[StreamSlot] = set()
        self.by_kind: Counter[str] = Counter()  # open streams of all users: "sse", "terminal"

    def open(self, user_id: str) -> int:
        return self._open[user_id]

    def acquire(self, user_id: str, kind: str, credential: str = "") -> StreamSlot:
        """One more open stream of `kind` for the user, or `TooManyStreams`; `credential`
        is the digest of the token it was opened with (`credential()`)."""
        if self.limit and self._open[user_id] >= self.limit:
            raise TooManyStreams(self.limit)
        if self.total and len(self._slots) >= self.total:
            raise TooManyStreams(self.total, everyone=True)
        self._open[user_id] += 1
        self.by_kind[kind] += 1
        slot = StreamSlot(self, user_id, kind, credential)
        self._slots.add(slot)
        return slot

    def end(
        self,
        why: Ending,
        *,
        user_id: str | None = None,
        credential: str | None = None,
        keep: Collection[str] = (),
    ) -> int:
        """End the open streams of `user_id` (None: of everyone), only those opened with
        `credential` when given, never those opened with one in `keep`. How many."""
        ending = [
            slot
            for slot in self._slots
            if (user_id is None or slot.user_id == user_id)
            and (credential is None or slot.credential == credential)
            and slot.credential not in keep
        ]
        for slot in ending:
            slot.end(why)
        return len(ending)

    def _release(self, slot: StreamSlot) -> None:
        self._slots.discard(slot)
        self._open[slot.user_id] -= 1
        if self._open[slot.user_id] <= 0:
            del self._open[slot.user_id]
        self.by_kind[slot.kind] -= 1


class StreamSlot:
    def __init__(self, cap: StreamCap, user_id: str, kind: str, credential: str) -> None:
        self._cap: StreamCap | None = cap
        self.user_id = user_id
        self.kind = kind
        self.credential = credential
        self.ended: Ending | None = None
        self._on_end: Callable[[Ending], None] | None = None

    def on_end(self, callback: Callable[[Ending], None]) -> None:
        """What the stream's holder does when the stream must end (at once if it has)."""
        self._on_end = callback
        if self.ended is not None:
            callback(self.ended)

    def end(self, why: Ending) -> None:
        if self.ended is None:
            self.ended = why
            if self._on_end is not None:
                self._on_end(why)

    def release(self) -> None:
        """Free the slot; safe to call more than once."""
        if self._cap is not None:
            self._cap._release(self)
            self._cap = None


class HeldStreamingResponse(StreamingResponse):
    """A streaming response that frees its slot when it ends, however it ends: finished,
    client gone, or never started (its generator's `finally` would not run then); and that
    finishes its body early, cleanly, when its slot is ended (`StreamCap.end`)."""

    def __init__(
        self,
        content: AsyncIterator[bytes],
        slot: StreamSlot,
        *,
        media_type: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(content, media_type=media_type, headers=headers)
        self.slot = slot
        self._started = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def noting_start(message: Message) -> None:
            if message["type"] == "http.response.start":
                self._started = True
            await send(message)

        try:
            with anyio.CancelScope() as body:
                self.slot.on_end(lambda _: body.cancel())
                await super().__call__(scope, receive, noting_start)
            if body.cancelled_caught:
                await self._finish_early(send)
        finally:
            self.slot.release()

    async def _finish_early(self, send: Send) -> None:
        # Closed first: its journal subscription (and any write past `send`) ends with it.
        closing = getattr(self.body_iterator, "aclose", None)
        if closing is not None:
            await closing()
        # A client that reads nothing must not hold the end up: the server then drops it.
        with anyio.move_on_after(1):
            if not self._started:
                await send(
                    {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
                )
            await send({"type": "http.response.body", "body": b"", "more_body": False})
