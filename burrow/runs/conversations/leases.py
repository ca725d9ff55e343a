"""This replica's run leases: which conversations' runs it may write (docs/scale-out.md).

With several replicas on one PostgreSQL, a run belongs to whoever holds its conversation's
lease (a row with a heartbeat, renewed by replicas.py). A replica takes the lease before a
run starts and gives it back after; what it appends to a conversation while it holds the
lease is fenced by it (EventStore.append), so once another replica took the lease over
nothing more of this one's gets in. With one process (no ownership) every run is this
one's and every call here is free.
"""

from __future__ import annotations

from typing import Protocol

from burrow.runs.journal.journal import Journal
from burrow.store.leases import Claim


class RunOwnership(Protocol):
    """Which replica runs a conversation's run (store/leases.py: a lease row with a
    heartbeat)."""

    async def acquire(self, cid: str) -> Claim: ...

    async def release(self, cid: str) -> None: ...

    async def holder(self, cid: str) -> str | None:
        """The replica whose live lease covers `cid` (None: none)."""
        ...

    @property
    def replica(self) -> str:
        """This replica's id."""
        ...


class RunElsewhere(Exception):
    """Another replica holds the conversation's run lease: ask that one (commands.py)."""

    def __init__(self, cid: str, holder: str) -> None:
        super().__init__(f"the run of {cid} belongs to replica {holder}")
        self.holder = holder


class RunLeases:
    def __init__(self, ownership: RunOwnership | None, journal: Journal) -> None:
        self._ownership = ownership
        self._held: set[str] = set()  # conversations whose run lease this replica holds
        self._taking: set[str] = set()  # ... and those whose lease it is taking right now
        if ownership is not None:
            journal.fence = self.fence

    def fence(self, cid: str) -> str | None:
        """The replica id this replica's appends to `cid` are fenced with (None: unfenced)."""
        assert self._ownership is not None
        return self._ownership.replica if cid in self._held else None

    async def take(self, cid: str) -> bool:
        """Take the conversation's lease, or raise RunElsewhere. True: it was taken over
        from a replica that died, whose cut-off run the caller must repair first."""
        claim = await self._claim(cid)
        if claim is not None and claim.holder is not None:
            raise RunElsewhere(cid, claim.holder)
        return claim is not None and claim.took_over

    async def take_if_free(self, cid: str) -> bool:
        """Take the lease unless another live replica holds it (False: that one's run)."""
        claim = await self._claim(cid)
        return claim is None or claim.holder is None

    async def _claim(self, cid: str) -> Claim | None:
        if self._ownership is None or cid in self._held:
            return None
        self._taking.add(cid)  # before the row exists: the lease upkeep must not drop it
        try:
            claim = await self._ownership.acquire(cid)
        finally:
            self._taking.discard(cid)
        if claim.holder is None:
            self._held.add(cid)
        return claim

    def claimed(self, cid: str) -> None:
        """The lease upkeep claimed a lapsed lease for this replica (replicas.py)."""
        if self._ownership is not None:
            self._held.add(cid)

    async def give_back(self, cid: str) -> None:
        if self._ownership is not None and cid in self._held:
            self._held.discard(cid)
            await self._ownership.release(cid)

    def lost(self, cid: str) -> None:
        """Another replica has the lease now: stop counting it as ours (no release)."""
        self._held.discard(cid)

    def held(self, *, taking: bool = False) -> set[str]:
        """The conversations whose lease this replica holds (the heartbeat renews them);
        `taking`: with those whose lease it is taking at this moment."""
        return self._held | self._taking if taking else set(self._held)

    async def holder(self, cid: str) -> str | None:
        """The replica running `cid`'s run, as the lease rows say (None: none, or one
        process)."""
        return None if self._ownership is None else await self._ownership.holder(cid)
