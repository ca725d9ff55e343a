"""Login rate limiting: failed attempts per client address, and per account from that
address, in a sliding window. Keying accounts by address too means nobody elsewhere can
lock the admin out by failing on purpose.

An attempt is reserved before the password is checked and counts against the limits while
it is in flight: checking first and recording after the (slow, awaited) password check
would let a burst of concurrent attempts all pass the check.

With several replicas (PostgreSQL) the failures are also kept in the database (`shared`),
so the limits hold across replicas; the in-flight reservation stays per replica (it is
what one replica's burst needs), so a burst spread over N replicas reaches at most N times
the limit of checks once, and is then refused everywhere.
"""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict, deque
from collections.abc import Sequence
from types import TracebackType
from typing import Protocol

from starlette.requests import Request

from burrow.api.errors import ApiError

IN_FLIGHT_WAIT = 1.0  # refused only because others are in flight: they finish in about this


class TooManyAttempts(Exception):
    def __init__(self, retry_after: float) -> None:
        self.retry_after = max(1, math.ceil(retry_after))
        super().__init__(f"Too many failed logins: try again in {self.retry_after} s.")


class SharedFailures(Protocol):
    """Failures every replica sees (burrow/store/login_failures.py)."""

    async def ages(self, keys: Sequence[str], window: float) -> dict[str, list[float]]:
        """Seconds since each failure of each key within `window`, youngest first."""
        ...

    async def record(self, keys: Sequence[str], window: float) -> None: ...

    async def clear(self, key: str) -> None: ...


class LoginThrottle:
    def __init__(
        self, max_failures: int = 10, max_per_client: int = 50, window: float = 300.0
    ) -> None:
        self.max_failures = max_failures
        self.max_per_client = max_per_client
        self.window = window
        self.shared: SharedFailures | None = None  # set when the server is one of several
        self._failures: defaultdict[str, deque[float]] = defaultdict(deque)
        self._in_flight: Counter[str] = Counter()

    def _recent(self, key: str) -> deque[float]:
        times = self._failures[key]
        cutoff = time.monotonic() - self.window
        while times and times[0] < cutoff:
            times.popleft()
        return times

    def _limits(self, client: str, username: str) -> tuple[tuple[str, int], ...]:
        return (
            (f"ip:{client}", self.max_per_client),
            (f"user:{client}:{username}", self.max_failures),
        )

    def attempt(self, client: str, username: str) -> LoginAttempt:
        """Reserve one password check, or raise `TooManyAttempts` with how long to wait.

        Synchronous on purpose: nothing else runs between the count and the reservation."""
        wait = 0.0
        limits = self._limits(client, username)
        for key, limit in limits:
            times = self._recent(key)
            if len(times) >= limit:
                wait = max(wait, times[-limit] + self.window - time.monotonic())
            elif len(times) + self._in_flight[key] >= limit:
                wait = max(wait, IN_FLIGHT_WAIT)
        if wait > 0:
            raise TooManyAttempts(wait)
        self._forget_idle()
        for key, _ in limits:
            self._in_flight[key] += 1
        return LoginAttempt(self, [key for key, _ in limits])

    async def admit(self, client: str, username: str) -> LoginAttempt:
        """`attempt`, then the limits against every replica's failures; use `async with`."""
        attempt = self.attempt(client, username)
        if self.shared is None:
            return attempt
        try:
            ages = await self.shared.ages(attempt.keys, self.window)
        except BaseException:
            attempt.__exit__(None, None, None)
            raise
        wait = 0.0
        for key, limit in self._limits(client, username):
            if len(ages[key]) >= limit:
                wait = max(wait, self.window - ages[key][limit - 1])
        if wait > 0:
            attempt.__exit__(None, None, None)  # not checked: frees the reservation only
            raise TooManyAttempts(wait)
        return attempt

    def _forget_idle(self) -> None:
        if len(self._failures) > 10_000:  # bound memory under a spray of usernames
            for key in [k for k in self._failures if not self._recent(k)]:
                del self._failures[key]

    def _end(self, keys: list[str], failed: bool, succeeded: bool) -> None:
        now = time.monotonic()
        for key in keys:
            self._in_flight[key] -= 1
            if self._in_flight[key] <= 0:
                del self._in_flight[key]
            if failed:
                self._failures[key].append(now)
        if succeeded:
            self._failures.pop(keys[-1], None)  # the account's failures from this client


class LoginAttempt:
    """One reserved password check; leaving the `with` block frees the reservation, and
    records a failure if `failed()` was called."""

    def __init__(self, throttle: LoginThrottle, keys: list[str]) -> None:
        self._throttle = throttle
        self.keys = keys
        self._outcome: str | None = None

    def failed(self) -> None:
        self._outcome = "failed"

    def succeeded(self) -> None:
        self._outcome = "succeeded"

    def __enter__(self) -> LoginAttempt:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # No outcome (the check could not run, e.g. the server was busy): not a failure.
        outcome = self._outcome
        self._throttle._end(self.keys, outcome == "failed", outcome == "succeeded")

    async def __aenter__(self) -> LoginAttempt:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)
        shared = self._throttle.shared
        if shared is None:
            return
        if self._outcome == "failed":
            await shared.record(self.keys, self._throttle.window)
        elif self._outcome == "succeeded":
            await shared.clear(self.keys[-1])


async def password_attempt(request: Request, username: str) -> LoginAttempt:
    """Reserve one password check with the login throttle, or answer 429: every route that
    checks a password goes through here, so none is a way around the login limits."""
    throttle: LoginThrottle = request.app.state.login_throttle
    # The peer, or what a trusted proxy forwarded (burrow.api.forwarded): never a header
    # the client chose.
    client = request.client.host if request.client else "?"
    try:
        return await throttle.admit(client, username)
    except TooManyAttempts as exc:
        raise ApiError(
            429, "too_many_attempts", str(exc), {"Retry-After": str(exc.retry_after)}
        ) from None


def counted(throttle: LoginThrottle, client: str, key: str, code: str, what: str) -> LoginAttempt:
    """An attempt that counts whatever it ends with (a call anyone may make, as a token's
    fire or a webhook delivery: every one spends the window, not only a bad one), or a 429
    `code` saying when `what` may come again."""
    try:
        attempt = throttle.attempt(client, key)
    except TooManyAttempts as exc:
        raise ApiError(
            429,
            code,
            f"Too many {what}: try again in {exc.retry_after} s.",
            {"Retry-After": str(exc.retry_after)},
        ) from exc
    attempt.failed()
    return attempt
