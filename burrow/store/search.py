"""Search across one user's conversations: titles, and the text of user and assistant
messages in the journal.

A plain case-insensitive LIKE on both dialects (SQLite lowers ASCII only): a scan of the
owner's message rows, bounded by `SCAN` rows, with `%`, `_` and the escape character
escaped so the query is matched literally. The journal stores each payload as JSON text,
so the query is matched in its JSON spelling and each candidate is confirmed on the
decoded message text (a hit in a tool call's arguments or in thinking is not one).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa

from burrow.store.database import Database
from burrow.store.schema import conversations, events

SCAN = 500  # message rows looked at per search, newest conversations first
SNIPPET = 160  # characters of context shown around a hit
_ESCAPE = "\\"
_MESSAGES = ("user.message", "assistant.message")

HitKind = Literal["title", "user", "assistant"]


@dataclass(frozen=True)
class SearchHit:
    conversation_id: str
    title: str
    kind: HitKind
    seq: int | None  # the message's event; None for a title hit
    snippet: str


def like_pattern(text: str) -> str:
    """`%text%` with LIKE's wildcards in `text` matched literally (ESCAPE '\\')."""
    escaped = text.replace(_ESCAPE, _ESCAPE * 2).replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def snippet(text: str, at: int, length: int) -> str:
    """About `SNIPPET` characters of `text` around the match at `at`, on one line."""
    start = max(0, at - SNIPPET // 3)
    end = min(len(text), max(at + length, start + SNIPPET))
    cut = " ".join(text[start:end].split())
    return ("…" if start > 0 else "") + cut + ("…" if end < len(text) else "")


class ConversationSearch:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def search(self, owner_id: str, text: str, limit: int) -> list[SearchHit]:
        owned = conversations.c.owner_id == owner_id
        titles = (
            sa.select(conversations.c.id, conversations.c.title)
            .where(owned, conversations.c.title.ilike(like_pattern(text), escape=_ESCAPE))
            .order_by(conversations.c.updated_at.desc())
            .limit(limit)
        )
        in_json = json.dumps(text, ensure_ascii=False)[1:-1]  # as the journal spells it
        messages = (
            sa.select(
                events.c.conversation_id,
                conversations.c.title,
                events.c.seq,
                events.c.type,
                events.c.data,
            )
            .join(conversations, conversations.c.id == events.c.conversation_id)
            .where(
                owned,
                events.c.type.in_(_MESSAGES),
                events.c.data.ilike(like_pattern(in_json), escape=_ESCAPE),
            )
            .order_by(conversations.c.updated_at.desc(), events.c.seq.desc())
            .limit(SCAN)
        )

        def query(conn: sa.Connection) -> tuple[list[Any], list[Any]]:
            return list(conn.execute(titles)), list(conn.execute(messages))

        title_rows, message_rows = await self._db.run(query)
        needle = text.lower()
        hits = [
            SearchHit(
                r.id,
                r.title,
                "title",
                None,
                snippet(r.title, r.title.lower().find(needle), len(text)),
            )
            for r in title_rows
        ]
        for row in message_rows:
            if len(hits) >= limit:
                break
            content = json.loads(row.data).get("content")
            at = content.lower().find(needle) if isinstance(content, str) else -1
            if at < 0:
                continue  # the query was in the thinking, a tool call or a key
            kind: HitKind = "user" if row.type == "user.message" else "assistant"
            hits.append(
                SearchHit(
                    row.conversation_id, row.title, kind, row.seq, snippet(content, at, len(text))
                )
            )
        return hits[:limit]
