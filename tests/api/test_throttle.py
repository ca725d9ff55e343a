"""The login throttle under attack: a concurrent burst, and forged forwarding headers."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import httpx

from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import ADMIN_PASSWORD, running_server, serve_process

LOGIN = "/api/auth/login"
WRONG = {"username": "admin", "password": "guess"}
RIGHT = {"username": "admin", "password": ADMIN_PASSWORD}


async def test_a_concurrent_burst_gets_at_most_the_limit_of_password_checks(
    tmp_path: Path,
) -> None:
    async with (
        running_server(tmp_path, lambda: ScriptedProvider([])) as srv,
        httpx.AsyncClient(
            base_url=srv.base_url, timeout=60, limits=httpx.Limits(max_connections=100)
        ) as attacker,
    ):
        responses = await asyncio.gather(*(attacker.post(LOGIN, json=WRONG) for _ in range(100)))
        statuses = Counter(r.status_code for r in responses)
        # Checking the limit and recording the failure sat across the awaited password
        # check: 43 of 100 got checked. Reserved before the await, exactly 10 are.
        assert statuses == {401: 10, 429: 90}, statuses
        for refused in (r for r in responses if r.status_code == 429):
            assert refused.json()["error"]["code"] == "too_many_attempts"
            assert int(refused.headers["retry-after"]) >= 1
        # The 10 failures are recorded: the right password is refused too, for minutes.
        after = await attacker.post(LOGIN, json=RIGHT)
        assert after.status_code == 429 and int(after.headers["retry-after"]) > 60


def _forged(address: str) -> dict[str, str]:
    return {"X-Forwarded-For": address}


async def test_forged_x_forwarded_for_does_not_reset_the_throttle(tmp_path: Path) -> None:
    # A real `burrow serve`: its uvicorn believed X-Forwarded-For from 127.0.0.1.
    with serve_process(tmp_path, "demo") as (_, base):
        async with httpx.AsyncClient(base_url=base, timeout=60) as attacker:
            for i in range(10):
                r = await attacker.post(LOGIN, json=WRONG, headers=_forged(f"203.0.113.{i}"))
                assert r.status_code == 401, r.text
            # Every attempt counted against the real peer, whatever address it claimed.
            r = await attacker.post(LOGIN, json=RIGHT, headers=_forged("198.51.100.7"))
            assert r.status_code == 429, r.text


async def test_x_forwarded_for_is_honoured_from_a_trusted_proxy(tmp_path: Path) -> None:
    with serve_process(tmp_path, "demo", {"BURROW_TRUSTED_PROXIES": "127.0.0.1"}) as (_, base):
        async with httpx.AsyncClient(base_url=base, timeout=60) as proxy:
            for _ in range(10):
                r = await proxy.post(LOGIN, json=WRONG, headers=_forged("203.0.113.1"))
                assert r.status_code == 401, r.text
            blocked = await proxy.post(LOGIN, json=RIGHT, headers=_forged("203.0.113.1"))
            assert blocked.status_code == 429
            # What the client wrote left of the proxy's entry proves nothing.
            chain = _forged("198.51.100.9, 203.0.113.1")
            assert (await proxy.post(LOGIN, json=RIGHT, headers=chain)).status_code == 429
            # Another client behind the same proxy is not locked out.
            other = await proxy.post(LOGIN, json=RIGHT, headers=_forged("198.51.100.7"))
            assert other.status_code == 200, other.text
