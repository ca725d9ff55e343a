"""Profiles: named agent setups (system prompt, model, tool and skill allowlists, approval
mode). Each user has their own; shared ones (no owner) are written by administrators and
seen by everyone. Looking a name up finds the user's own first."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from burrow.store.database import Database
from burrow.store.records import utc
from burrow.store.schema import profiles


@dataclass(frozen=True)
class Profile:
    name: str
    shared: bool  # an administrator's, visible to every user
    system_prompt: str | None = None  # None: Burrow's own
    model: str | None = None
    tools: tuple[str, ...] | None = None  # the tools offered and allowed; None: all
    skills: tuple[str, ...] | None = None  # the skills listed and loadable; None: all
    approval_mode: str | None = None
    updated_at: datetime | None = None


def _names(text: str | None) -> tuple[str, ...] | None:
    return None if text is None else tuple(json.loads(text))


def _profile(row: Any) -> Profile:
    return Profile(
        name=row.name,
        shared=row.owner_id is None,
        system_prompt=row.system_prompt,
        model=row.model,
        tools=_names(row.tools),
        skills=_names(row.skills),
        approval_mode=row.approval_mode,
        updated_at=utc(row.updated_at),
    )


def _owner_is(owner_id: str | None) -> sa.ColumnElement[bool]:
    column = profiles.c.owner_id
    return column.is_(None) if owner_id is None else column == owner_id


class ProfileStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def visible_to(self, user_id: str) -> list[Profile]:
        """The user's own and the shared ones, by name (a shadowed shared one too)."""
        query = (
            sa.select(profiles)
            .where(_owner_is(user_id) | _owner_is(None))
            .order_by(profiles.c.name, profiles.c.owner_id.is_(None))
        )
        return await self._db.run(lambda conn: [_profile(r) for r in conn.execute(query)])

    async def find(self, user_id: str, name: str) -> Profile | None:
        """What `name` means to this user: their own profile, else a shared one."""
        query = (
            sa.select(profiles)
            .where(profiles.c.name == name, _owner_is(user_id) | _owner_is(None))
            .order_by(profiles.c.owner_id.is_(None))  # the user's own first
            .limit(1)
        )
        return await self._db.run(
            lambda conn: next((_profile(r) for r in conn.execute(query)), None)
        )

    async def put(self, owner_id: str | None, profile: Profile) -> Profile:
        """Create or replace; `owner_id` None: a shared profile."""
        ts = datetime.now(UTC)
        key = _owner_is(owner_id) & (profiles.c.name == profile.name)
        values = {
            "system_prompt": profile.system_prompt,
            "model": profile.model,
            "tools": None if profile.tools is None else json.dumps(list(profile.tools)),
            "skills": None if profile.skills is None else json.dumps(list(profile.skills)),
            "approval_mode": profile.approval_mode,
            "updated_at": ts,
        }

        def upsert(conn: sa.Connection) -> None:
            # A NULL owner is not unique to the index: the replace keeps shared names unique.
            conn.execute(profiles.delete().where(key))
            conn.execute(
                profiles.insert().values(
                    id=f"p_{secrets.token_hex(8)}", owner_id=owner_id, name=profile.name, **values
                )
            )

        await self._db.run(upsert)
        return Profile(
            name=profile.name,
            shared=owner_id is None,
            system_prompt=profile.system_prompt,
            model=profile.model,
            tools=profile.tools,
            skills=profile.skills,
            approval_mode=profile.approval_mode,
            updated_at=ts,
        )

    async def delete(self, owner_id: str | None, name: str) -> bool:
        key = _owner_is(owner_id) & (profiles.c.name == name)
        return await self._db.run(
            lambda conn: conn.execute(profiles.delete().where(key)).rowcount > 0
        )

    async def count(self, owner_id: str | None) -> int:
        query = sa.select(sa.func.count()).select_from(profiles).where(_owner_is(owner_id))
        return await self._db.run(lambda conn: int(conn.execute(query).scalar_one()))
