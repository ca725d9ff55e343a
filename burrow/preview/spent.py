"""Link tokens already used: a signed preview link opens its preview once.

A link travels in a URL (history, logs, a shoulder); once the owner's browser has
exchanged it for the preview cookie, a copy of it opens nothing. Each link carries a
random nonce; the nonces of used links are kept until the links expire (the link TTL,
120 s by default), so the memory holds at most the links used within one TTL. When it is
full, further links are refused (fail closed) rather than forgetting a nonce whose link
could still be replayed.

One user may hold only a share of it (a hundredth): links are minted on every request for
them, so a user who opens links in a loop fills their own share and is refused, while
everyone else still opens previews. Filling the whole memory takes a hundred accounts.

The memory is per process: with several replicas, each preview listener keeps its own,
and a copied link could be used once on each (docs/scale-out.md).
"""

from __future__ import annotations

import heapq
import time
from collections import Counter

CAPACITY = 100_000  # ~20 MB at most; that many links opened within one TTL is no person
USERS_TO_FILL = 100  # one user's share is the capacity over this


class TooManyLinks(Exception):
    """Every slot (of the memory, or of this user's share) holds a link not expired yet."""

    def __init__(self, *, everyone: bool) -> None:
        super().__init__("the memory is full" if everyone else "this user's share is full")
        self.everyone = everyone  # False: only this user is refused


class SpentLinks:
    def __init__(self, capacity: int = CAPACITY, share: int | None = None) -> None:
        self.capacity = capacity
        # A memory too small to split (a test's) is one share.
        fair = capacity // USERS_TO_FILL if capacity >= USERS_TO_FILL else capacity
        self.share = fair if share is None else share
        self._nonces: set[str] = set()
        self._expiries: list[tuple[float, str, str]] = []  # a heap: the next to expire first
        self._held: Counter[str] = Counter()  # user -> nonces held

    def __len__(self) -> int:
        return len(self._nonces)

    def spend(
        self, nonce: str, expires: float, now: float | None = None, *, user: str = ""
    ) -> bool:
        """True the first time a link is used; False for a replay. Raises `TooManyLinks`
        when the memory, or `user`'s share of it, is full."""
        if nonce in self._nonces:
            return False
        self._forget_expired(time.time() if now is None else now)
        if len(self._nonces) >= self.capacity:
            raise TooManyLinks(everyone=True)
        if self._held[user] >= self.share:
            raise TooManyLinks(everyone=False)
        self._nonces.add(nonce)
        self._held[user] += 1
        heapq.heappush(self._expiries, (expires, nonce, user))
        return True

    def _forget_expired(self, now: float) -> None:
        # An expired link is refused by its signature's time already; its nonce can go.
        while self._expiries and self._expiries[0][0] <= now:
            _, nonce, user = heapq.heappop(self._expiries)
            self._nonces.discard(nonce)
            self._held[user] -= 1
            if not self._held[user]:
                del self._held[user]
