"""Login rate limiting: failed attempts per client address and per account, in a window."""

from __future__ import annotations

import time
from collections import defaultdict, deque


class LoginThrottle:
    def __init__(self, max_failures: int = 10, window: float = 300.0) -> None:
        self.max_failures = max_failures
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
        for key in (f"ip:{client}", f"user:{username}"):
            times = self._recent(key)
            if len(times) >= self.max_failures:
                waits.append(times[0] + self.window - time.monotonic())
        return max(waits)

    def failed(self, client: str, username: str) -> None:
        now = time.monotonic()
        self._failures[f"ip:{client}"].append(now)
        self._failures[f"user:{username}"].append(now)

    def succeeded(self, username: str) -> None:
        self._failures.pop(f"user:{username}", None)
