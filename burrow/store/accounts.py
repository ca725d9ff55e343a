"""Accounts: password hashes (argon2, off the event loop), browser sessions and API tokens.

Secrets handed to clients are random; the database keeps only their SHA-256, so a copy of
the database lets nobody in.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import sqlalchemy as sa

from burrow.store.conversations import new_id, now
from burrow.store.database import Database
from burrow.store.passwords import Passwords
from burrow.store.records import User
from burrow.store.schema import sessions, users

SESSION_LIFETIME = timedelta(days=30)

TokenKind = Literal["session", "api"]


def token_digest(token: str) -> str:
    """What is stored of a token (its SHA-256); its first 16 characters name it."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class TokenInfo:
    token_hash: str
    name: str
    created_at: datetime


@dataclass(frozen=True)
class Account:
    """A user as an administrator sees it."""

    id: str
    username: str
    is_admin: bool
    disabled: bool
    created_at: datetime


class LastAdmin(Exception):
    """The change would leave no enabled administrator."""


SESSION_CACHE_SECONDS = 10.0


class AccountStore:
    def __init__(self, db: Database, passwords: Passwords | None = None) -> None:
        self._db = db
        self.passwords = passwords or Passwords()
        # Every request looks its caller up: a verified token is remembered briefly. Logout
        # here forgets it at once; with several replicas another one may accept it for up
        # to SESSION_CACHE_SECONDS more.
        self._verified: dict[tuple[str, str], tuple[User, float]] = {}
        # Counts forgets: a lookup that overlapped one (it may have read the row before a
        # disable) is not remembered.
        self._forgotten = 0

    async def get_or_create(self, username: str, *, is_admin: bool = False) -> User:
        # Insert-if-absent, then read: replicas that start at once on a fresh database all
        # ensure the admin, and a select-then-insert failed the later ones' starts.
        insert = (
            self._db.upsert(users)
            .values(id=new_id("u"), username=username, is_admin=is_admin, created_at=now())
            .on_conflict_do_nothing(index_elements=[users.c.username])
        )

        def insert_then_read(conn: sa.Connection) -> User:
            conn.execute(insert)
            row = conn.execute(sa.select(users).where(users.c.username == username)).one()
            return User(id=row.id, username=row.username, is_admin=row.is_admin)

        return await self._db.run(insert_then_read)

    async def create_user(self, username: str, password: str, *, is_admin: bool = False) -> User:
        password_hash = await self.passwords.hash(password)
        uid = new_id("u")
        query = users.insert().values(
            id=uid,
            username=username,
            password_hash=password_hash,
            is_admin=is_admin,
            created_at=datetime.now(UTC),
        )
        await self._db.run(lambda conn: conn.execute(query))
        return User(id=uid, username=username, is_admin=is_admin)

    async def username_taken(self, username: str) -> bool:
        query = sa.select(users.c.id).where(users.c.username == username)
        return await self._db.run(lambda conn: conn.execute(query).first()) is not None

    async def set_password(self, user_id: str, password: str) -> None:
        password_hash = await self.passwords.hash(password)
        query = users.update().where(users.c.id == user_id).values(password_hash=password_hash)
        await self._db.run(lambda conn: conn.execute(query))

    async def has_password(self, user_id: str) -> bool:
        query = sa.select(users.c.password_hash).where(users.c.id == user_id)
        return bool(await self._db.run(lambda conn: conn.execute(query).scalar()))

    async def authenticate(self, username: str, password: str) -> User | None:
        """The user if the password is theirs; raises `PasswordsBusy` when too many checks
        are queued."""
        row: Any = None

        async def stored_hash() -> str:
            nonlocal row
            query = sa.select(users).where(users.c.username == username)
            row = await self._db.run(lambda conn: conn.execute(query).first())
            if row is None or not row.password_hash:
                return self.passwords.unmatchable  # the same work: the timing says nothing
            return str(row.password_hash)

        if not await self.passwords.verify(password, stored_hash):
            return None
        if row is None or not row.password_hash or row.disabled:
            return None
        return User(id=row.id, username=row.username, is_admin=row.is_admin)

    async def check_password(self, user_id: str, password: str) -> bool:
        """Whether `password` is the user's; raises `PasswordsBusy` like `authenticate`."""

        async def stored_hash() -> str:
            query = sa.select(users.c.password_hash).where(users.c.id == user_id)
            found = await self._db.run(lambda conn: conn.execute(query).scalar())
            return str(found) if found else self.passwords.unmatchable

        return await self.passwords.verify(password, stored_hash)

    async def change_password(self, user_id: str, new: str, *, keep: str | None) -> None:
        """Set the password and end every other browser session of the user; `keep` is
        the token of the session that asked (it stays logged in). API tokens stay: they
        are revoked one by one."""
        await self.set_password(user_id, new)
        kept = token_digest(keep) if keep else ""
        await self._revoke_sessions(user_id, except_digest=kept)

    async def _revoke_sessions(self, user_id: str, *, except_digest: str = "") -> None:
        query = sessions.delete().where(
            sessions.c.user_id == user_id,
            sessions.c.kind == "session",
            sessions.c.token_hash != except_digest,
        )
        await self._db.run(lambda conn: conn.execute(query))
        self._forget_user(user_id, keep=except_digest)

    def _forget_user(self, user_id: str, keep: str = "") -> None:
        self._forgotten += 1
        for key in [k for k, (u, _) in self._verified.items() if u.id == user_id]:
            if key[0] != keep:
                del self._verified[key]

    async def accounts(self) -> list[Account]:
        query = sa.select(users).order_by(users.c.created_at, users.c.username)
        rows = await self._db.run(lambda conn: list(conn.execute(query)))
        return [Account(r.id, r.username, r.is_admin, r.disabled, r.created_at) for r in rows]

    async def update(
        self,
        user_id: str,
        *,
        disabled: bool | None = None,
        is_admin: bool | None = None,
        password: str | None = None,
    ) -> Account | None:
        """Change an account (None: leave as is); None if there is no such user. Raises
        `LastAdmin` rather than leave no enabled administrator. Disabling, or setting the
        password, ends the user's browser sessions; disabling also stops their API tokens
        (until enabled again)."""
        password_hash = await self.passwords.hash(password) if password is not None else None

        def change(conn: sa.Connection) -> Account | None:
            admins: set[str] = set()
            if disabled or is_admin is False:
                # Lock every enabled admin's row, in one order, before reading (PostgreSQL):
                # two admins demoting each other at once then go one after the other, and
                # the second sees the first's change.
                admins = set(
                    conn.execute(
                        sa.select(users.c.id)
                        .where(users.c.is_admin, ~users.c.disabled)
                        .order_by(users.c.id)
                        .with_for_update()
                    ).scalars()
                )
            row = conn.execute(sa.select(users).where(users.c.id == user_id)).first()
            if row is None:
                return None
            admin_after = row.is_admin if is_admin is None else is_admin
            disabled_after = row.disabled if disabled is None else disabled
            if user_id in admins and (not admin_after or disabled_after) and admins == {user_id}:
                raise LastAdmin(
                    f"{row.username} is the last enabled administrator: make another "
                    "account an administrator first."
                )
            values: dict[str, Any] = {"is_admin": admin_after, "disabled": disabled_after}
            if password_hash is not None:
                values["password_hash"] = password_hash
            conn.execute(users.update().where(users.c.id == user_id).values(**values))
            if disabled_after or password_hash is not None:
                conn.execute(
                    sessions.delete().where(
                        sessions.c.user_id == user_id, sessions.c.kind == "session"
                    )
                )
            return Account(row.id, row.username, admin_after, disabled_after, row.created_at)

        account = await self._db.run(change)
        # This replica forgets at once; another may accept a cached token for up to
        # SESSION_CACHE_SECONDS more.
        self._forget_user(user_id)
        return account

    async def issue(self, user_id: str, kind: TokenKind, name: str = "") -> str:
        """A new secret for the user; returned once, stored only as its digest."""
        token = ("bw_" if kind == "api" else "") + secrets.token_urlsafe(32)
        now = datetime.now(UTC)
        query = sessions.insert().values(
            token_hash=token_digest(token),
            user_id=user_id,
            kind=kind,
            name=name,
            created_at=now,
            expires_at=now + SESSION_LIFETIME if kind == "session" else None,
        )
        await self._db.run(lambda conn: conn.execute(query))
        return token

    async def user_for(self, token: str, kind: TokenKind) -> User | None:
        return await self._holder(token_digest(token), (kind,))

    async def holder(self, digest: str) -> User | None:
        """The user of a live sign-in named by its digest (a browser session or an API
        token), or None once it has ended: logged out, revoked, expired, user disabled."""
        return await self._holder(digest, ("session", "api"))

    async def _holder(self, digest: str, kinds: tuple[TokenKind, ...]) -> User | None:
        for kind in kinds:
            cached = self._verified.get((digest, kind))
            if cached is not None and cached[1] > time.monotonic():
                return cached[0]
        forgotten = self._forgotten
        found = await self._lookup(digest, kinds)
        if found is None:
            return None
        user, kind = found
        if forgotten == self._forgotten:
            if len(self._verified) > 10_000:
                self._verified.clear()
            self._verified[(digest, kind)] = (user, time.monotonic() + SESSION_CACHE_SECONDS)
        return user

    async def _lookup(
        self, digest: str, kinds: tuple[TokenKind, ...]
    ) -> tuple[User, TokenKind] | None:
        query = (
            sa.select(users, sessions.c.expires_at, sessions.c.kind)
            .join(sessions, sessions.c.user_id == users.c.id)
            .where(sessions.c.token_hash == digest, sessions.c.kind.in_(kinds))
        )
        row = await self._db.run(lambda conn: conn.execute(query).first())
        if row is None or row.disabled:
            return None
        expires = row.expires_at
        if expires is not None:
            expires = expires if expires.tzinfo else expires.replace(tzinfo=UTC)
            if expires < datetime.now(UTC):
                return None
        return User(id=row.id, username=row.username, is_admin=row.is_admin), row.kind

    async def revoke(self, token: str) -> None:
        digest = token_digest(token)
        self._forget(digest)
        query = sessions.delete().where(sessions.c.token_hash == digest)
        await self._db.run(lambda conn: conn.execute(query))

    def _forget(self, digest: str) -> None:
        self._forgotten += 1
        for kind in ("session", "api"):
            self._verified.pop((digest, kind), None)

    async def revoke_api_token(self, user_id: str, token_hash: str) -> bool:
        self._forget(token_hash)
        query = sessions.delete().where(
            sessions.c.token_hash == token_hash,
            sessions.c.user_id == user_id,
            sessions.c.kind == "api",
        )
        return bool(await self._db.run(lambda conn: conn.execute(query).rowcount))

    async def api_tokens(self, user_id: str) -> list[TokenInfo]:
        query = (
            sa.select(sessions)
            .where(sessions.c.user_id == user_id, sessions.c.kind == "api")
            .order_by(sessions.c.created_at)
        )
        rows = await self._db.run(lambda conn: list(conn.execute(query)))
        return [TokenInfo(r.token_hash, r.name, r.created_at) for r in rows]
