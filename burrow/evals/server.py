"""An embedded server for an eval: a real `burrow serve` process on free local ports with
its own data directory, stopped (and its sandboxes with it) when the eval ends."""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from burrow.ports import free_port

ADMIN = "admin"
START_TIMEOUT = 60.0


@dataclass(frozen=True)
class Embedded:
    base_url: str
    username: str
    password: str
    log: Path


@asynccontextmanager
async def embedded_server(
    data_dir: Path, model: str, env: dict[str, str] | None = None
) -> AsyncIterator[Embedded]:
    data_dir.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - once, before the server
    port, preview_port = free_port(), free_port()
    password = secrets.token_urlsafe(16)
    log = data_dir / "server.log"
    environ = {**os.environ, **(env or {})}
    environ.update(BURROW_ADMIN_PASSWORD=password, BURROW_DATA_DIR=str(data_dir))
    environ.pop("BURROW_DATABASE_URL", None)  # the data directory's own SQLite file
    argv = [sys.executable, "-m", "burrow.cli", "serve", "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--preview-port", str(preview_port), "--model", model]
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            *argv, env=environ, stdout=out, stderr=asyncio.subprocess.STDOUT
        )
    base_url = f"http://127.0.0.1:{port}"
    try:
        await _healthy(base_url, process, log)
        yield Embedded(base_url, ADMIN, password, log)
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 20)
            except TimeoutError:
                process.kill()
                await process.wait()


async def _healthy(base_url: str, process: asyncio.subprocess.Process, log: Path) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + START_TIMEOUT
    async with httpx.AsyncClient(base_url=base_url, timeout=2.0) as http:
        while loop.time() < deadline:
            if process.returncode is not None:
                tail = log.read_text(errors="replace")[-2000:]  # noqa: ASYNC240 - it is over
                raise RuntimeError(f"The eval's server exited at start:\n{tail}")
            try:
                if (await http.get("/api/health")).is_success:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError(f"The eval's server was not healthy after {START_TIMEOUT:.0f} s ({log})")
