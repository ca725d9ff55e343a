"""Per-user secrets: which are valid, which a conversation's commands get, what is masked.

A conversation's mask holds every value of its owner's secrets, chosen or not, and every
value this server ever gave its sandbox: a process started with a value that was since
changed or deleted can still print it. The journal masks with the same set, so no event,
replay or model request shows a value (DESIGN.md §8: they appear as `****`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence

from burrow.sandbox.backend import Sandbox
from burrow.sandbox.masking import SecretMask
from burrow.sandbox.secret_env import Exposure, SecretSandbox
from burrow.store.database import Database
from burrow.store.events import EventStore
from burrow.store.records import Event, NewEvent, ProjectionChange
from burrow.store.secrets import Redactor
from burrow.store.user_secrets import SecretName, UserSecretStore

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_NAME = 128
MIN_VALUE = 4  # shorter values would turn ordinary output into a field of ****
MAX_VALUE = 8192  # bytes; certificates and private keys fit
MAX_SECRETS = 100  # per user
# Variables the sandbox's own shells and Burrow's bookkeeping rely on: overriding one would
# break every command (PATH, HOME), or run code in each of them (BASH_ENV, LD_PRELOAD).
RESERVED = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD", "OLDPWD", "TERM", "HOSTNAME",
        "IFS", "ENV", "BASH_ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND",
        "TMPDIR", "LANG", "LC_ALL", "PYTHONHOME",
    }
)  # fmt: skip
RESERVED_PREFIXES = ("LD_", "BASH_FUNC_", "BURROW_")


class SecretRefused(ValueError):
    """A name or value that cannot be stored or chosen; the message says what to change."""


def check_name(name: str) -> None:
    if len(name) > MAX_NAME or not NAME.fullmatch(name):
        raise SecretRefused(
            f"{name[:MAX_NAME]!r} is not an environment variable name: use letters, digits "
            f"and _, not starting with a digit, at most {MAX_NAME} characters."
        )
    if name in RESERVED or name.startswith(RESERVED_PREFIXES):
        raise SecretRefused(
            f"{name} is reserved: the sandbox's shells need it as it is. Choose another name."
        )


def check_value(value: str) -> None:
    if "\0" in value:
        raise SecretRefused("A secret's value cannot hold a NUL character.")
    if len(value) < MIN_VALUE:
        raise SecretRefused(
            f"A secret's value needs at least {MIN_VALUE} characters: shorter ones cannot be "
            "masked in output without masking ordinary text."
        )
    if len(value.encode()) > MAX_VALUE:
        raise SecretRefused(f"A secret's value can be at most {MAX_VALUE} bytes.")


class ConversationSecrets:
    def __init__(self, store: UserSecretStore) -> None:
        self._store = store
        self._owners: dict[str, str] = {}  # cid -> owner, for every cid with a mask
        self._masks: dict[str, SecretMask] = {}
        self._given: defaultdict[str, set[str]] = defaultdict(set)  # cid -> values given

    async def names(self, owner_id: str) -> list[SecretName]:
        return await self._store.names(owner_id)

    async def put(self, owner_id: str, name: str, value: str) -> SecretName:
        check_name(name)
        check_value(value)
        known = {s.name for s in await self._store.names(owner_id)}
        if name not in known and len(known) >= MAX_SECRETS:
            raise SecretRefused(f"A user can keep {MAX_SECRETS} secrets; delete one first.")
        stored = await self._store.put(owner_id, name, value)
        await self._refresh_owner(owner_id)
        return stored

    async def delete(self, owner_id: str, name: str) -> bool:
        deleted = await self._store.delete(owner_id, name)
        await self._refresh_owner(owner_id)
        return deleted

    async def unknown(self, owner_id: str, names: Iterable[str]) -> list[str]:
        """The names among `names` that are not secrets of `owner_id`."""
        known = {s.name for s in await self._store.names(owner_id)}
        return sorted({n for n in names if n not in known})

    async def value(self, owner_id: str, name: str) -> str | None:
        """One secret's value, for a credential Burrow hands git itself; None: no such secret."""
        return (await self._store.values(owner_id)).get(name)

    async def exposure(self, cid: str) -> Exposure:
        """The environment the conversation's next command gets, and its mask, read now."""
        found = await self._store.of_conversation(cid)
        if found is None:
            return Exposure(mask=self.mask(cid))
        env = {n: found.values[n] for n in found.chosen if n in found.values}
        self._given[cid].update(env.values())
        self._owners[cid] = found.owner_id
        mask = self._masks[cid] = SecretMask([*found.values.values(), *self._given[cid]])
        return Exposure(env, mask)

    async def owner_mask(self, owner_id: str) -> SecretMask:
        """Every value of `owner_id`'s secrets, for what a route shows outside the journal."""
        return SecretMask((await self._store.values(owner_id)).values())

    def mask(self, cid: str) -> SecretMask:
        """The latest known mask, without a lookup."""
        return self._masks.get(cid) or SecretMask()

    async def mask_for(self, cid: str) -> SecretMask:
        mask = self._masks.get(cid)
        if mask is None:
            found = await self._store.of_conversation(cid)
            if found is not None:
                self._owners[cid] = found.owner_id
            mask = self._masks[cid] = SecretMask(found.values.values() if found else ())
        return mask

    def mask_everywhere(self, text: str) -> str:
        """`text` with every secret value known to any conversation masked (for the log)."""
        for mask in {id(m): m for m in self._masks.values()}.values():
            text = mask.text(text)
        return text

    def sandbox(self, cid: str, inner: Sandbox) -> Sandbox:
        """`inner` as the conversation's commands and terminals see it."""
        return SecretSandbox(inner, lambda: self.exposure(cid), lambda: self.mask(cid))

    def forget(self, cid: str) -> None:
        """The conversation was deleted."""
        self._owners.pop(cid, None)
        self._masks.pop(cid, None)
        self._given.pop(cid, None)

    async def _refresh_owner(self, owner_id: str) -> None:
        cids = [cid for cid, owner in self._owners.items() if owner == owner_id]
        if not cids:
            return
        values = list((await self._store.values(owner_id)).values())
        for cid in cids:
            self._masks[cid] = SecretMask([*values, *self._given[cid]])


class MaskingEventStore(EventStore):
    """The journal's store, masking each conversation's secret values in every string of
    every event before it is written (and so before it is published or sent to a model)."""

    def __init__(
        self,
        db: Database,
        redactor: Redactor,
        secrets: ConversationSecrets,
        *,
        announce_as: str | None = None,
    ) -> None:
        super().__init__(db, redactor, announce_as=announce_as)
        self._secrets = secrets

    async def append(
        self,
        cid: str,
        batch: Sequence[NewEvent],
        change: ProjectionChange,
        fence: str | None = None,
    ) -> list[Event]:
        mask = await self._secrets.mask_for(cid)
        if mask:
            batch = [NewEvent(e.type, mask.data(e.data), e.run_id) for e in batch]
        return await super().append(cid, batch, change, fence)
