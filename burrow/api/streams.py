"""Open streams per user (`BURROW_MAX_STREAMS_PER_USER`): an SSE event stream or a terminal
socket holds a connection, a file descriptor, for as long as its client likes. Without a cap
one account could open them until the server has no descriptors left for anyone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Mapping

from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from burrow.api.errors import ApiError

# Terminal socket refused because the user is at the cap: 4000 + the HTTP status (429), like
# the other close codes (4401, 4403, 4404).
CLOSE_TOO_MANY_STREAMS = 4429


class TooManyStreams(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(
            f"You already have {limit} event streams and terminal sockets open (the limit, "
            "BURROW_MAX_STREAMS_PER_USER): close some tabs or terminals and try again."
        )
        # A WebSocket close reason holds at most 123 bytes.
        self.close_reason = (
            f"too many open streams (BURROW_MAX_STREAMS_PER_USER={limit}): close a tab or terminal"
        )

    def api_error(self) -> ApiError:
        return ApiError(429, "too_many_streams", str(self), {"Retry-After": "5"})


class StreamCap:
    def __init__(self, limit: int) -> None:
        self.limit = limit  # 0: no cap
        self._open: Counter[str] = Counter()
        self.by_kind: Counter[str] = Counter()  # open streams of all users: "sse", "terminal"

    def open(self, user_id: str) -> int:
        return self._open[user_id]

    def acquire(self, user_id: str, kind: str) -> StreamSlot:
        """One more open stream of `kind` for the user, or `TooManyStreams`."""
        if self.limit and self._open[user_id] >= self.limit:
            raise TooManyStreams(self.limit)
        self._open[user_id] += 1
        self.by_kind[kind] += 1
        return StreamSlot(self, user_id, kind)

    def _release(self, user_id: str, kind: str) -> None:
        self._open[user_id] -= 1
        if self._open[user_id] <= 0:
            del self._open[user_id]
        self.by_kind[kind] -= 1


class StreamSlot:
    def __init__(self, cap: StreamCap, user_id: str, kind: str) -> None:
        self._cap = cap
        self._user_id: str | None = user_id
        self._kind = kind

    def release(self) -> None:
        """Free the slot; safe to call more than once."""
        if self._user_id is not None:
            self._cap._release(self._user_id, self._kind)
            self._user_id = None


class HeldStreamingResponse(StreamingResponse):
    """A streaming response that frees its slot when it ends, however it ends: finished,
    client gone, or never started (its generator's `finally` would not run then)."""

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

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.slot.release()
