"""Shared bits of the benchmarks: percentiles and a uniform report line."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from burrow.api.app import create_app
from burrow.config import Settings
from burrow.llm.base import Provider
from burrow.ports import free_port
from burrow.services import Services, open_services


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


# Where `report` also appends each figure as a JSON line (`make bench`, bench/figures.py).
FIGURES_ENV = "BURROW_BENCH_OUT"


def report(
    name: str, value: float, unit: str, baseline_name: str, baseline: float, target: str
) -> None:
    """One figure, its baseline from the same run, and their ratio."""
    ratio = value / baseline if baseline else float("inf")
    print(
        f"{name}: {value:.3f} {unit} | baseline {baseline_name}: {baseline:.3f} {unit} "
        f"| ratio {ratio:.2f}x | target {target}",
        flush=True,
    )
    if out := os.environ.get(FIGURES_ENV):
        # The key leaves out the parenthesised details (p90, n) that change run to run.
        key = f"{Path(sys.argv[0]).stem}: {name.split(' (')[0]}"
        figure = {"key": key, "name": name, "value": value, "unit": unit}
        figure |= {"baseline_name": baseline_name, "baseline": baseline, "ratio": ratio}
        figure |= {"higher_is_better": unit.endswith("/s"), "target": target}
        with open(out, "a") as f:
            f.write(json.dumps(figure) + "\n")


BENCH_PASSWORD = "bench-admin-password"


@contextlib.asynccontextmanager
async def serve_in_process(
    data_dir: Path,
    provider: Callable[[], Provider],
    *,
    connections: int = 100,
    **more: Any,
) -> AsyncIterator[tuple[str, Services, httpx.AsyncClient]]:
    """A real server on 127.0.0.1 in this event loop, and a logged-in client; `more`
    adds settings (database_url=..., replica_id=...)."""
    port = free_port()
    settings = Settings(data_dir=data_dir, port=port, admin_password=BENCH_PASSWORD, **more)
    holder: dict[str, Services] = {}

    async def start() -> Services:
        holder["s"] = await open_services(settings, provider=provider)
        return holder["s"]

    server = uvicorn.Server(
        uvicorn.Config(create_app(start), host="127.0.0.1", port=port, log_level="warning")
    )
    serving = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 - uvicorn offers only this flag
        await asyncio.sleep(0.01)
    base = f"http://127.0.0.1:{port}"
    limits = httpx.Limits(max_connections=connections)
    try:
        async with httpx.AsyncClient(base_url=base, limits=limits, timeout=60) as client:
            login = {"username": "admin", "password": BENCH_PASSWORD}
            assert (await client.post("/api/auth/login", json=login)).status_code == 200
            yield base, holder["s"], client
    finally:
        server.should_exit = True
        await serving


def healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/api/health", timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def spawn_serve(
    data_dir: Path, model: str, *, quiet: bool = False, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """A `burrow serve` child process (not yet waited for) and its base URL; `env` adds
    to its environment (e.g. BURROW_SANDBOX)."""
    port = free_port()
    # Its own free port for the preview listener too (port + 1 may be taken).
    command = [sys.executable, "-m", "burrow.cli", "serve", "--port", str(port)]
    command += ["--preview-port", str(free_port())]
    command += ["--data-dir", str(data_dir), "--model", model]
    out = subprocess.DEVNULL if quiet else None
    child_env = {**os.environ, "BURROW_ADMIN_PASSWORD": BENCH_PASSWORD, **(env or {})}
    return (
        subprocess.Popen(command, env=child_env, stdout=out, stderr=out),
        f"http://127.0.0.1:{port}",
    )


def wait_healthy(server: subprocess.Popen[bytes], base: str, poll: float = 0.005) -> None:
    deadline = time.monotonic() + 30
    while not healthy(base):
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            raise RuntimeError("burrow serve did not become healthy")
        time.sleep(poll)
