"""A login flood, run as its own process so its work does not slow the test's probes:
`python -m tests.api.login_flood BASE_URL ADDRESSES PER_ADDRESS SECONDS`.

Each of ADDRESSES loopback addresses (127.0.0.2, 127.0.0.3, ...: real distinct peers, no
forged headers) keeps PER_ADDRESS wrong logins in flight, each for a new username so only
the server's capacity limits them. Prints "flooding" once password checks are answered,
then a JSON object of status counts when SECONDS are up.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
import time
from collections import Counter

import httpx


async def _keep_sending(
    base: str, address: str, until: float, statuses: Counter[int], answered: asyncio.Event
) -> None:
    transport = httpx.AsyncHTTPTransport(local_address=address)
    async with httpx.AsyncClient(base_url=base, transport=transport, timeout=120) as client:
        while time.monotonic() < until:
            body = {"username": f"u{secrets.token_hex(6)}", "password": "wrong"}
            response = await client.post("/api/auth/login", json=body)
            statuses[response.status_code] += 1
            if response.status_code == 401:
                answered.set()
            elif response.status_code in (429, 503):  # back off as told, as a client would
                await asyncio.sleep(float(response.headers.get("retry-after", "1")))


async def flood(base: str, addresses: int, per_address: int, seconds: float) -> Counter[int]:
    statuses: Counter[int] = Counter()
    answered = asyncio.Event()
    until = time.monotonic() + seconds
    tasks = [
        asyncio.create_task(_keep_sending(base, f"127.0.0.{2 + a}", until, statuses, answered))
        for a in range(addresses)
        for _ in range(per_address)
    ]
    await answered.wait()
    print("flooding", flush=True)
    await asyncio.gather(*tasks)
    return statuses


def main() -> None:
    base, addresses, per_address, seconds = sys.argv[1:5]
    statuses = asyncio.run(flood(base, int(addresses), int(per_address), float(seconds)))
    print(json.dumps({str(k): v for k, v in statuses.items()}), flush=True)


if __name__ == "__main__":
    main()
