"""What each account has spent, across its conversations (the admin's usage page)."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from burrow.store.database import Database
from burrow.store.schema import conversations, users


@dataclass(frozen=True)
class AccountUsage:
    user_id: str
    username: str
    conversations: int
    prompt_tokens: int
    completion_tokens: int
    cost: float


async def usage_by_account(db: Database) -> list[AccountUsage]:
    """Every account, with its conversations' token and cost totals; biggest spender first."""
    c = conversations.c
    query = (
        sa.select(
            users.c.id,
            users.c.username,
            sa.func.count(c.id),
            sa.func.coalesce(sa.func.sum(c.prompt_tokens), 0),
            sa.func.coalesce(sa.func.sum(c.completion_tokens), 0),
            sa.func.coalesce(sa.func.sum(c.cost), 0.0),
        )
        .select_from(users.outerjoin(conversations, c.owner_id == users.c.id))
        .group_by(users.c.id, users.c.username)
    )
    rows = await db.run(lambda conn: conn.execute(query).all())
    found = [AccountUsage(r[0], r[1], int(r[2]), int(r[3]), int(r[4]), float(r[5])) for r in rows]
    return sorted(found, key=lambda u: (-u.cost, -(u.prompt_tokens + u.completion_tokens)))
