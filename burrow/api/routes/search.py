"""Search across the caller's own conversations: titles and message text."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel

from burrow.api.deps import ServicesDep, UserDep
from burrow.api.errors import ApiError
from burrow.store.search import ConversationSearch, HitKind

router = APIRouter(prefix="/api/search", tags=["search"])

MAX_QUERY = 200  # characters; a longer query is a mistake or an attack, never a search


class SearchHitOut(BaseModel):
    conversation_id: str
    title: str
    kind: HitKind  # where it was found: the title, a user message or an assistant message
    seq: int | None  # the message's event seq (open the conversation there); None for a title
    snippet: str  # the text around the match, on one line


@router.get("")
async def search(
    svc: ServicesDep,
    user: UserDep,
    q: str = "",
    limit: Annotated[int, Query(ge=1, le=50)] = 20,
) -> list[SearchHitOut]:
    """Newest conversations first; matched case-insensitively (ASCII on SQLite), with `%`
    and `_` taken literally."""
    text = q.strip()
    if not text:
        raise ApiError(400, "empty_query", "Say what to search for: ?q=… must not be empty.")
    if len(text) > MAX_QUERY:
        raise ApiError(
            400,
            "query_too_long",
            f"The search has {len(text)} characters: use at most {MAX_QUERY}.",
        )
    hits = await ConversationSearch(svc.db).search(user.id, text, limit)
    return [
        SearchHitOut(
            conversation_id=h.conversation_id,
            title=h.title,
            kind=h.kind,
            seq=h.seq,
            snippet=h.snippet,
        )
        for h in hits
    ]
