"""A flood of failed logins against a real `burrow serve`: password checks (argon2) run off
the event loop, so health stays responsive; a burst beyond the hashing capacity is refused
fast instead of piling up; the server's memory grows by the hashes in flight, no more."""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import httpx

from burrow.store.passwords import default_workers
from tests.api.harness import serve_process
from tests.process_memory import MIB, PeakRss

REPO = Path(__file__).resolve().parents[2]
# argon2's default costs 64 MiB per hash in progress; at most `default_workers()` run at
# once, the queued ones hold only their request. Slack for the flood's connections and
# what the allocator keeps. On the event loop the checks were serial too: memory was not
# the symptom there, latency was; this bound keeps a bigger pool from trading one for the other.
ARGON2_MEMORY = 64 * MIB
RSS_GROWTH_BOUND = default_workers() * ARGON2_MEMORY + 48 * MIB


async def _health_latencies(client: httpx.AsyncClient, count: int) -> list[float]:
    """Probes on a fixed schedule (every 50 ms), not one after another: a probe stuck behind
    the flood must not make the others wait until the flood is over."""

    async def probe(delay: float) -> float:
        await asyncio.sleep(delay)
        started = time.perf_counter()
        response = await client.get("/api/health")
        assert response.status_code == 200
        return time.perf_counter() - started

    return list(await asyncio.gather(*(probe(i * 0.05) for i in range(count))))


async def test_a_login_flood_leaves_health_responsive(tmp_path: Path) -> None:
    with serve_process(tmp_path, "demo") as (server, base):
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            await _health_latencies(client, 5)  # warm up
            idle = statistics.median(await _health_latencies(client, 40))
            memory = PeakRss(server.pid)
            memory.mark()
            # 4 addresses x 6 logins in flight, as the report's 36 logins from 4 addresses.
            flood = await asyncio.create_subprocess_exec(
                *[sys.executable, "-m", "tests.api.login_flood", base, "4", "6", "6"],
                cwd=REPO,
                stdout=asyncio.subprocess.PIPE,
            )
            try:
                assert flood.stdout is not None
                started = await asyncio.wait_for(flood.stdout.readline(), 60)
                assert started.strip() == b"flooding"
                during = await _health_latencies(client, 40)
                output, _ = await asyncio.wait_for(flood.communicate(), 120)
                growth, described = memory.growth(), memory.describe()
            finally:
                if flood.returncode is None:
                    flood.kill()
                    await flood.wait()
    statuses = Counter({int(k): v for k, v in json.loads(output.decode().splitlines()[-1]).items()})
    busy = statistics.median(during)
    print(
        f"health p50 idle {idle * 1000:.2f} ms, during the flood {busy * 1000:.2f} ms "
        f"(max {max(during) * 1000:.1f} ms, x{busy / idle:.2f}); flood answers {dict(statuses)}; "
        f"server {described} (bound {RSS_GROWTH_BOUND / MIB:.0f} MiB)"
    )
    assert statuses[401] >= 10, statuses  # the password checks really ran meanwhile
    # On the event loop, each check stalled every other request: health took seconds.
    assert busy <= 5 * idle, (busy, idle)
    assert growth <= RSS_GROWTH_BOUND, described


async def test_a_burst_beyond_the_hashing_capacity_is_refused_fast(tmp_path: Path) -> None:
    with serve_process(tmp_path, "demo") as (_, base):
        clients = [  # one per address, made before the clock starts (each costs a TLS context)
            httpx.AsyncClient(
                base_url=base,
                transport=httpx.AsyncHTTPTransport(
                    local_address=f"127.0.0.{2 + a}", limits=httpx.Limits(max_connections=20)
                ),
                timeout=300,
            )
            for a in range(4)
        ]

        async def attempt(client: httpx.AsyncClient, n: int) -> tuple[int, float, httpx.Response]:
            started = time.perf_counter()
            body = {"username": f"burst{n}", "password": "wrong"}
            response = await client.post("/api/auth/login", json=body)
            return response.status_code, time.perf_counter() - started, response

        try:
            results = await asyncio.gather(*(attempt(c, n) for c in clients for n in range(20)))
        finally:
            for client in clients:
                await client.aclose()
    checked = [seconds for status, seconds, _ in results if status == 401]
    refused = [(seconds, r) for status, seconds, r in results if status == 503]
    assert len(checked) + len(refused) == len(results), Counter(s for s, _, _ in results)
    print(
        f"{len(checked)} checked (p50 {statistics.median(checked):.2f} s), {len(refused)} "
        f"refused (p50 {statistics.median(s for s, _ in refused):.3f} s)"
    )
    # 80 at once: the hashing queue holds a bounded number (33 here; hashes finishing while
    # the burst arrives admit a few more), the rest are told to come back.
    assert len(refused) >= len(results) // 4
    for _, response in refused:
        assert response.json()["error"]["code"] == "passwords_busy"
        assert response.headers["retry-after"] == "1"
    assert statistics.median(s for s, _ in refused) * 3 < statistics.median(checked)
