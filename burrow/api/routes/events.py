"""The journal over HTTP: an SSE stream that resumes exactly, or one JSON page."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response

from burrow.api.deps import (
    ConversationDep,
    ServicesDep,
    StreamCapDep,
    UserDep,
    credential_digest,
)
from burrow.api.direct_write import WriteNow
from burrow.api.schemas import EventOut
from burrow.api.sse import EventStreamResponse
from burrow.api.streams import TooManyStreams
from burrow.runs.journal.journal import PAGE_BYTES

router = APIRouter(prefix="/api/conversations", tags=["events"])

HEARTBEAT_SECONDS = 15.0
# The largest seq a database column holds (a signed 64-bit integer); a larger `after` or
# Last-Event-ID would overflow the query, and no event is past it anyway.
MAX_SEQ = 2**63 - 1


@router.get(
    "/{cid}/events",
    response_model=list[EventOut],
    responses={200: {"content": {"text/event-stream": {}, "application/json": {}}}},
)
async def events(
    request: Request,
    conversation: ConversationDep,
    svc: ServicesDep,
    user: UserDep,
    streams: StreamCapDep,
    after: Annotated[int, Query(ge=0, le=MAX_SEQ)] = 0,
    format: Annotated[str, Query(pattern="^(sse|json)$")] = "sse",
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    last_event_id: Annotated[str | None, Header()] = None,
) -> Response:
    """SSE of every event after `after` (or `Last-Event-ID`), then live events.

    With `format=json`, one page as a JSON array instead: at most `limit` events and about
    1 MiB (always at least one event); ask again with `after` = the last seq for the next.
    """
    if last_event_id and last_event_id.strip().isdigit():
        after = max(after, min(int(last_event_id), MAX_SEQ))
    cid = conversation.id
    if format == "json":
        page = await svc.conversations.events(cid, after, limit, PAGE_BYTES)
        body = "[" + ",".join(e.envelope_json() for e in page) + "]"
        return Response(body, media_type="application/json")
    try:
        # Held until the stream ends, however it ends; ended with the credential it names.
        slot = streams.acquire(user.id, "sse", credential_digest(request))
    except TooManyStreams as exc:
        raise exc.api_error() from None

    async def stream(direct: WriteNow) -> AsyncIterator[bytes]:
        yield b": connected\n\n"
        async for batch in svc.conversations.follow(cid, after, HEARTBEAT_SECONDS, direct):
            # Events that arrived together (or one page of history) go out in one write.
            yield b"".join(e.sse_frame for e in batch) if batch else b": heartbeat\n\n"

    return EventStreamResponse(stream, slot, svc.settings.stream_stall_seconds)
