"""Per-user caps on what runs at once, so one account cannot starve the others of CPU,
memory, processes and disk: concurrent runs (`BURROW_MAX_RUNS_PER_USER`), live sandboxes
(`BURROW_MAX_SANDBOXES_PER_USER`) and the disk all of a user's workspaces take together
(`BURROW_MAX_DISK_MB_PER_USER`). Admins are not exempt: an admin's runaway script
starves everyone just the same, and an operator can raise the caps.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import ClassVar, Protocol

from burrow.sandbox.backend import ErrorCode, SandboxError


class QuotaExceeded(Exception):
    """A per-user cap refused a new run or sandbox; `error_code` names which."""

    error_code: ClassVar[str]


class RunQuotaExceeded(QuotaExceeded):
    error_code = "too_many_runs"

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(
            f"You already have {limit} runs going (the limit, BURROW_MAX_RUNS_PER_USER): "
            "wait for one to finish or stop one, then send again."
        )


class SandboxQuotaExceeded(QuotaExceeded, SandboxError):
    """Also a SandboxError, so a tool call that needed the sandbox fails with this reason
    instead of failing the run."""

    error_code = "too_many_sandboxes"

    def __init__(self, limit: int) -> None:
        super().__init__(
            ErrorCode.UNAVAILABLE,
            f"You already have {limit} live sandboxes, all busy running commands (the limit, "
            "BURROW_MAX_SANDBOXES_PER_USER): wait for a command to finish, or stop one, "
            "and try again.",
        )


class DiskQuotaExceeded(QuotaExceeded, SandboxError):
    """A sandbox does not start while its owner's workspaces hold the disk quota."""

    error_code = "disk_quota_exceeded"

    def __init__(self, used: int, limit_mb: int) -> None:
        super().__init__(
            ErrorCode.UNAVAILABLE,
            f"Your conversations' workspaces take {used >> 20} MiB of disk, your limit "
            f"(BURROW_MAX_DISK_MB_PER_USER) is {limit_mb} MiB: delete conversations you no "
            "longer need (or files in them), then try again.",
        )


class DiskCache(Protocol):
    """Sandboxes kept for an owner's sake that count toward their disk quota but can be
    dropped to make room (repo_setup.py's kept setups)."""

    async def kept_by(self, owner: str) -> list[str]:
        """The owner's kept sandbox ids, the least recently used first."""
        ...

    async def drop(self, sandbox_id: str) -> None: ...


class OwnerTally:
    """What each owner holds at this moment (runs going, live sandboxes), by conversation:
    the one count both per-owner caps are checked against.

    An owner is looked up once per conversation (owners never change). A caller checks
    `held_by` and then `hold`s with no await between them, so concurrent admissions
    cannot all slip under a cap.
    """

    def __init__(self, owner_of: Callable[[str], Awaitable[str | None]] | None) -> None:
        self._owner_of = owner_of
        self._owners: dict[str, str] = {}  # cid -> owner, as learned
        self._held: dict[str, str] = {}  # cid -> owner, while it holds

    async def owner(self, cid: str) -> str | None:
        """The conversation's owner (None: not a conversation, or no lookup given)."""
        owner = self._owners.get(cid)
        if owner is None and self._owner_of is not None:
            owner = await self._owner_of(cid)
            if owner is not None:
                self._owners[cid] = owner
        return owner

    def held_by(self, owner: str, *, besides: str | None = None) -> list[str]:
        return [c for c, o in self._held.items() if o == owner and c != besides]

    def hold(self, cid: str, owner: str) -> None:
        self._held[cid] = owner

    def release(self, cid: str) -> None:
        self._held.pop(cid, None)

    def forget(self, cid: str) -> None:
        """The conversation was deleted."""
        self._held.pop(cid, None)
        self._owners.pop(cid, None)

    def clear(self) -> None:
        self._held.clear()
