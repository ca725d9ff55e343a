"""Login rate limiting: failed attempts per client address, and per account from that
address, in a sliding window. Keying accounts by address too means nobody elsewhere can
lock the admin out by failing on purpose."""

from __future__ import annotations

import time
from collections import defaultdict, deque


class LoginThrottle:
    def __init__(
        self, max_failures: int = 10, max_per_client: int = 50, window: float = 300.0
    ) -> None:
        self.max_failures = max_failures
        self.max_per_client = max_per_client
        self.window = window
        self._failures: defaultdict[str, deque[float]] = defaultdict(deque)

    def _recent(self, key: str) -> deque[float]:
        times = self._failures[key]
        cutoff = time.monotonic() - self.window
        while times and times[0] < cutoff:
            times.popleft()
        return times

    def retry_after(self, client: str, username: str) -> float:
        """Seconds until another attempt is allowed; 0 when it is allowed now."""
        waits = [0.0]
        limits = (
            (f"ip:{client}", self.max_per_client),
            (f"user:{client}:{username}", self.max_failures),
        )
        for key, limit in limits:
            times = self._recent(key)
            if len(times) >= limit:
                waits.append(times[-limit] + self.window - time.monotonic())
        return max(waits)

    def failed(self, client: str, username: str) -> None:
        now = time.monotonic()
        if len(self._failures) > 10_000:  # bound memory under a spray of usernames
            for key in [k for k in self._failures if not self._recent(k)]:
                del self._failures[key]
        self._failures[f"ip:{client}"].append(now)
        self._failures[f"user:{client}:{username}"].append(now)

    def succeeded(self, client: str, username: str) -> None:
        self._failures.pop(f"user:{client}:{username}", None)
