"""Link tokens already used: a signed preview link opens its preview once.

A link travels in a URL (history, logs, a shoulder); once the owner's browser has
exchanged it for the preview cookie, a copy of it opens nothing. Each link carries a
random nonce; the nonces of used links are kept until the links expire (the link TTL,
120 s by default), so the memory holds at most the links used within one TTL. When it is
full, further links are refused (fail closed) rather than forgetting a nonce whose link
could still be replayed.

The memory is per process: with several replicas, each preview listener keeps its own,
and a copied link could be used once on each (docs/scale-out.md).
"""

from __future__ import annotations

import heapq
import time

CAPACITY = 100_000  # ~20 MB at most; that many links opened within one TTL is no person


class TooManyLinks(Exception):
    """Every slot holds a link that has not expired yet."""


class SpentLinks:
    def __init__(self, capacity: int = CAPACITY) -> None:
        self.capacity = capacity
        self._nonces: set[str] = set()
        self._expiries: list[tuple[float, str]] = []  # a heap: the next to expire first

    def __len__(self) -> int:
        return len(self._nonces)

    def spend(self, nonce: str, expires: float, now: float | None = None) -> bool:
        """True the first time a link is used; False for a replay."""
        if nonce in self._nonces:
            return False
        self._forget_expired(time.time() if now is None else now)
        if len(self._nonces) >= self.capacity:
            raise TooManyLinks
        self._nonces.add(nonce)
        heapq.heappush(self._expiries, (expires, nonce))
        return True

    def _forget_expired(self, now: float) -> None:
        # An expired link is refused by its signature's time already; its nonce can go.
        while self._expiries and self._expiries[0][0] <= now:
            _, nonce = heapq.heappop(self._expiries)
            self._nonces.discard(nonce)
