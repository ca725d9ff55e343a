"""Password hashing off the event loop: bounded, refused fast beyond the bound."""

from __future__ import annotations

import asyncio
import time

import pytest
from argon2 import PasswordHasher, extract_parameters
from argon2.exceptions import VerifyMismatchError

from burrow.store.passwords import Passwords, PasswordsBusy


async def _const(value: str) -> str:
    return value


async def test_checks_beyond_workers_and_queue_are_refused_at_once() -> None:
    passwords = Passwords(workers=1, waiting=3)
    stored = await passwords.hash("right")
    started = time.perf_counter()
    one = await passwords.verify("wrong", lambda: _const(stored))
    single = time.perf_counter() - started
    assert one is False

    async def timed(password: str) -> tuple[bool | None, float]:
        began = time.perf_counter()
        try:
            ok = await passwords.verify(password, lambda: _const(stored))
        except PasswordsBusy:
            return None, time.perf_counter() - began
        return ok, time.perf_counter() - began

    results = await asyncio.gather(*(timed("right" if i == 0 else "x") for i in range(40)))
    answered = [r for r in results if r[0] is not None]
    refused = [seconds for ok, seconds in results if ok is None]
    assert len(answered) == 4 and len(refused) == 36  # 1 hashing + 3 queued, no more
    assert answered[0][0] is True and not any(ok for ok, _ in answered[1:])
    assert max(refused) < single / 2  # refused without waiting for any hash
    passwords.close()


async def test_the_event_loop_keeps_running_while_hashing() -> None:
    passwords = Passwords(workers=1, waiting=8)
    stored = await passwords.hash("pw")
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            ticks += 1

    ticker = asyncio.create_task(tick())
    started = time.perf_counter()
    await asyncio.gather(*(passwords.verify("no", lambda: _const(stored)) for _ in range(4)))
    elapsed = time.perf_counter() - started
    ticker.cancel()
    # On the loop, the ticker would not have run at all until the hashes were done.
    assert ticks >= 0.3 * elapsed / 0.005, (ticks, elapsed)
    passwords.close()


def test_the_unmatchable_hash_costs_a_real_check_and_matches_nothing() -> None:
    hasher = PasswordHasher()
    passwords = Passwords(workers=1)
    # The parameters a real hash has, so a login for a missing user costs the same work.
    assert extract_parameters(passwords.unmatchable) == extract_parameters(hasher.hash("x"))
    for password in ("", "x", "password"):
        with pytest.raises(VerifyMismatchError):  # checked, not refused as malformed
            hasher.verify(passwords.unmatchable, password)
    assert Passwords(workers=1).unmatchable != passwords.unmatchable
    passwords.close()
