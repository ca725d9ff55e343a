"""A flood of failed logins against a real `burrow serve`: password checks (argon2) run off
the event loop, so health, event streams and terminals stay responsive; a burst beyond the
hashing capacity is refused fast instead of piling up; the server's memory grows by the
hashes in flight, no more."""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
from websockets.asyncio.client import ClientConnection, connect

from burrow.store.passwords import default_workers
from tests.api.harness import ADMIN_PASSWORD, log_in, serve_process
from tests.process_memory import MIB, PeakRss

REPO = Path(__file__).resolve().parents[2]
# argon2's default costs 64 MiB per hash in progress; at most `default_workers()` run at
# once, the queued ones hold only their request. Slack for the flood's connections and
# what the allocator keeps: a pool without a bound would trade the stall for memory.
ARGON2_MEMORY = 64 * MIB
RSS_GROWTH_BOUND = default_workers() * ARGON2_MEMORY + 48 * MIB


HEALTH_EVERY = 0.05
OTHER_EVERY = 0.1  # terminal and stream probes: fewer, so the probing itself stays light


async def _health_latencies(client: httpx.AsyncClient, count: int) -> list[float]:
    """Probes on a fixed schedule (every 50 ms), not one after another: a probe stuck behind
    the flood must not make the others wait until the flood is over (and hide the stall
    from the median). The terminal and stream probes keep a schedule for the same reason."""

    async def probe(delay: float) -> float:
        await asyncio.sleep(delay)
        started = time.perf_counter()
        response = await client.get("/api/health")
        assert response.status_code == 200
        return time.perf_counter() - started

    return list(await asyncio.gather(*(probe(i * HEALTH_EVERY) for i in range(count))))


async def _terminal_round_trips(terminal: ClientConnection, count: int) -> list[float]:
    """Commands typed into one shell on the schedule, each timed until its answer shows."""
    sent: dict[bytes, float] = {}
    answered: dict[bytes, float] = {}

    async def type_one(n: int) -> None:
        await asyncio.sleep(n * OTHER_EVERY)
        marker = f"RT-{n * 7}.".encode()  # the typed line shows `$((n*7))`, not the marker
        sent[marker] = time.perf_counter()
        await terminal.send(f"echo RT-$(({n}*7)).\n".encode())

    async def read_answers() -> None:
        seen = bytearray()
        while len(answered) < count:
            message = await terminal.recv()
            assert isinstance(message, bytes)
            now = time.perf_counter()
            seen += message
            for marker in sent.keys() - answered.keys():
                if marker in seen:
                    answered[marker] = now

    async with asyncio.timeout(60):
        await asyncio.gather(read_answers(), *(type_one(n) for n in range(count)))
    return [answered[marker] - sent[marker] for marker in sent]


async def _stream_openings(client: httpx.AsyncClient, cid: str, count: int) -> list[float]:
    """Event streams opened on the schedule, each timed until its first bytes arrive."""

    async def open_one(delay: float) -> float:
        await asyncio.sleep(delay)
        started = time.perf_counter()
        async with client.stream("GET", f"/api/conversations/{cid}/events") as response:
            assert response.status_code == 200
            await anext(response.aiter_raw())
        return time.perf_counter() - started

    return list(await asyncio.gather(*(open_one(i * OTHER_EVERY) for i in range(count))))


async def _probe(
    client: httpx.AsyncClient, terminal: ClientConnection, cid: str
) -> dict[str, list[float]]:
    """Two seconds of health checks, terminal round trips and stream openings."""
    health, typed, streams = await asyncio.gather(
        _health_latencies(client, 40),
        _terminal_round_trips(terminal, 20),
        _stream_openings(client, cid, 20),
    )
    return {"health": health, "terminal": typed, "sse": streams}


async def test_a_login_flood_leaves_health_streams_and_terminals_responsive(
    tmp_path: Path,
) -> None:
    with serve_process(tmp_path, "demo") as (server, base):
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            await log_in(client, "admin", ADMIN_PASSWORD)
            cid = (await client.post("/api/conversations", json={})).json()["id"]
            opened = await client.post(
                f"/api/conversations/{cid}/terminals", json={"cols": 80, "rows": 24}
            )
            assert opened.status_code == 201, opened.text
            url = f"{base.replace('http', 'ws', 1)}/api/conversations/{cid}/terminals/"
            url += f"{opened.json()['terminal_id']}/ws"
            cookie = {"Cookie": f"burrow_session={client.cookies['burrow_session']}"}
            async with connect(url, additional_headers=cookie) as terminal:
                await _probe(client, terminal, cid)  # warm up
                idle = await _probe(client, terminal, cid)
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
                    during = await _probe(client, terminal, cid)
                    still_flooding = flood.returncode is None
                    output, _ = await asyncio.wait_for(flood.communicate(), 120)
                    growth, described = memory.growth(), memory.describe()
                finally:
                    if flood.returncode is None:
                        flood.kill()
                        await flood.wait()
    statuses = Counter({int(k): v for k, v in json.loads(output.decode().splitlines()[-1]).items()})
    ratios = {}
    for what in idle:
        quiet, busy = statistics.median(idle[what]), statistics.median(during[what])
        ratios[what] = busy / quiet
        print(
            f"{what} p50 idle {quiet * 1000:.2f} ms, during the flood {busy * 1000:.2f} ms "
            f"(max {max(during[what]) * 1000:.1f} ms, x{busy / quiet:.2f})"
        )
    print(
        f"flood answers {dict(statuses)}; server {described} "
        f"(bound {RSS_GROWTH_BOUND / MIB:.0f} MiB)"
    )
    assert still_flooding  # every probe above ran while the flood went on
    assert statuses[401] >= 10, statuses  # the password checks really ran meanwhile
    # On the event loop, each check stalled every other request: health took seconds.
    assert all(ratio <= 5 for ratio in ratios.values()), ratios
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
