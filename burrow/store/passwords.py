"""Password hashing (argon2) off the event loop, with bounded concurrency.

One argon2 check costs tens of milliseconds of CPU on purpose. Run on the event loop, a
few dozen failed logins stall every other request, SSE stream and terminal. Here hashes
run on their own threads (argon2 releases the GIL) at a lower CPU priority, at most
`workers` at a time with at most `waiting` more queued; anything beyond that is refused at
once with `PasswordsBusy` instead of piling up.
"""

from __future__ import annotations

import asyncio
import base64
import os
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

T = TypeVar("T")

NICENESS = 10  # hashing threads yield the CPU to the event loop's thread


class PasswordsBusy(Exception):
    """More password checks are queued than allowed; the caller should retry shortly."""


def default_workers() -> int:
    """Half the cores, so the event loop keeps at least one (argon2's lanes use threads
    of their own, which inherit the lower priority)."""
    return max(1, (os.cpu_count() or 2) // 2)


def _lower_priority() -> None:
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICENESS)
    except (AttributeError, OSError):
        pass  # not on Linux: same priority, still off the loop


def unmatchable_hash(hasher: PasswordHasher) -> str:
    """A hash with `hasher`'s parameters that no password matches (its salt and digest are
    random bytes): checking a password against it costs what a real check costs, and making
    it costs no hashing at all."""

    def b64(size: int) -> str:
        return base64.b64encode(os.urandom(size)).decode().rstrip("=")

    m, t, p = hasher.memory_cost, hasher.time_cost, hasher.parallelism
    kind = hasher.type.name.lower()
    return f"$argon2{kind}$v=19$m={m},t={t},p={p}${b64(hasher.salt_len)}${b64(hasher.hash_len)}"


class Passwords:
    def __init__(self, workers: int | None = None, waiting: int = 32) -> None:
        self.workers = workers or default_workers()
        self.waiting = waiting
        self._hasher = PasswordHasher()
        # What a login without a stored hash (no such user) is checked against.
        self.unmatchable = unmatchable_hash(self._hasher)
        self._pool = ThreadPoolExecutor(
            self.workers, thread_name_prefix="argon2", initializer=_lower_priority
        )
        self._lock = threading.Lock()
        self._pending = 0  # submitted and not finished, counted until the thread is done

    async def hash(self, password: str) -> str:
        self._admit()
        return await self._run(self._hasher.hash, password)

    async def verify(self, password: str, lookup: Callable[[], Awaitable[str]]) -> bool:
        """Whether `password` matches the hash `lookup` fetches. The slot is taken before
        the lookup, so a refused check costs no database work either."""
        self._admit()
        try:
            stored = await lookup()
        except BaseException:
            self._finished(None)
            raise

        def check() -> bool:
            try:
                return self._hasher.verify(stored, password)
            except (VerificationError, InvalidHashError):
                return False

        return await self._run(check)

    def _admit(self) -> None:
        with self._lock:
            if self._pending >= self.workers + self.waiting:
                raise PasswordsBusy(
                    f"{self._pending} password checks are already queued: try again in a second."
                )
            self._pending += 1

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        # Counted down when the thread finishes, not when the caller stops waiting: a
        # caller that goes away does not free the CPU its hash is still using.
        try:
            future: Future[T] = self._pool.submit(fn, *args)
        except RuntimeError:  # shut down
            self._finished(None)
            raise
        future.add_done_callback(self._finished)
        return await asyncio.wrap_future(future)

    def _finished(self, _: Future[Any] | None) -> None:
        with self._lock:
            self._pending -= 1

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
