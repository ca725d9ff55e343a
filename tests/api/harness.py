"""A real Burrow server on 127.0.0.1 for tests, and a small SSE client."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx
import uvicorn
from opentelemetry.sdk.trace import SpanProcessor

from burrow.api.app import create_app
from burrow.api.forwarded import TrustedProxies
from burrow.cli import server_config
from burrow.config import Settings
from burrow.llm.base import Provider
from burrow.ports import free_port
from burrow.preview.proxy import build_proxy
from burrow.services import Services, open_services

ADMIN_PASSWORD = "burrow-test-admin-password"


async def log_in(client: httpx.AsyncClient, username: str, password: str) -> None:
    """Log `client` in; its cookie jar then carries the session, as a browser's would."""
    response = await client.post(
        "/api/auth/login", json={"username": username, "password": password}
    )
    assert response.status_code == 200, response.text


@contextlib.contextmanager
def serve_process(
    data_dir: Path,
    model: str,
    env: dict[str, str] | None = None,
    *,
    stderr: IO[bytes] | None = None,
    start_seconds: list[float] | None = None,
    **popen: Any,
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A real `burrow serve` child process, healthy; yields it and its base URL.

    For tests that must kill the server outright or call it from blocking code; `env`
    adds settings (BURROW_...) to its environment; `stderr` collects what the server
    prints there (default: the test's own stderr); `start_seconds` gets how long it took
    from the spawn to its first healthy answer; `popen` goes to `subprocess.Popen`
    (`pass_fds`, `preexec_fn`: what the server inherits).
    """
    port = free_port()
    env = {**os.environ, "BURROW_ADMIN_PASSWORD": ADMIN_PASSWORD, **(env or {})}
    # Its own free port for the preview listener too (port + 1 may be taken).
    command = [sys.executable, "-m", "burrow.cli", "serve", "--port", str(port)]
    command += ["--preview-port", str(free_port())]
    command += ["--data-dir", str(data_dir), "--model", model]
    spawned = time.monotonic()
    process = subprocess.Popen(command, env=env, stderr=stderr, **popen)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = spawned + 30
        while not _healthy(base):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"burrow serve did not become healthy (exit {process.poll()})")
            time.sleep(0.02)
        if start_seconds is not None:
            start_seconds.append(time.monotonic() - spawned)
        yield process, base
    finally:
        process.kill()
        process.wait(10)


def _healthy(base: str) -> bool:
    try:
        return httpx.get(f"{base}/api/health", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


@dataclass
class RunningServer:
    base_url: str
    services: Services
    client: httpx.AsyncClient
    app: Any = None  # the FastAPI application, for its routes and OpenAPI document
    preview_port: int | None = None  # the preview proxy's listener, with preview=True

    async def create_conversation(self, title: str = "test") -> str:
        response = await self.client.post("/api/conversations", json={"title": title})
        assert response.status_code == 201, response.text
        cid: str = response.json()["id"]
        return cid

    async def send(self, cid: str, content: str) -> dict[str, Any]:
        response = await self.client.post(
            f"/api/conversations/{cid}/messages", json={"content": content}
        )
        assert response.status_code == 202, response.text
        body: dict[str, Any] = response.json()
        return body

    async def events(self, cid: str, after: int = 0) -> list[dict[str, Any]]:
        response = await self.client.get(
            f"/api/conversations/{cid}/events", params={"after": after, "format": "json"}
        )
        assert response.status_code == 200, response.text
        page: list[dict[str, Any]] = response.json()
        return page

    async def wait_for(
        self, cid: str, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30
    ) -> dict[str, Any]:
        """The first event (from seq 1) matching `predicate`, following the SSE stream."""
        async with asyncio.timeout(timeout):
            async for event in sse_events(self.client, cid):
                if predicate(event):
                    return event
        raise AssertionError("stream ended")

    async def run_finished(self, cid: str, run_id: str, timeout: float = 30) -> dict[str, Any]:
        return await self.wait_for(
            cid, lambda e: e["type"] == "run.finished" and e["run_id"] == run_id, timeout
        )


async def sse_events(
    client: httpx.AsyncClient, cid: str, last_event_id: int | None = None
) -> AsyncIterator[dict[str, Any]]:
    """Parse the event stream: yields envelopes, checking that `id:` matches `seq`."""
    headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
    async with client.stream(
        "GET", f"/api/conversations/{cid}/events", headers=headers, timeout=None
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        fields: dict[str, str] = {}
        async for line in response.aiter_lines():
            if line == "":
                if "data" in fields:
                    envelope = json.loads(fields["data"])
                    assert int(fields["id"]) == envelope["seq"]
                    assert fields["event"] == envelope["type"]
                    yield envelope
                fields = {}
            elif not line.startswith(":"):
                key, _, value = line.partition(":")
                fields[key] = value.removeprefix(" ")


@contextlib.asynccontextmanager
async def running_server(
    data_dir: Path,
    provider: Callable[[], Provider] | None,
    *,
    preview: bool = False,
    span_processor: SpanProcessor | None = None,
    middleware: type | None = None,
    **settings: Any,
) -> AsyncIterator[RunningServer]:
    """`burrow serve` on a free port of 127.0.0.1, with the model replaced by `provider`
    (None: the model the settings choose, as in production); `preview=True` also starts
    the preview proxy on its own free port, as `burrow serve` does; `middleware`, an ASGI
    middleware class, wraps the app's routes (outermost of the app's own middlewares)."""
    port = settings.pop("port", None) or free_port()  # chosen ahead: peers must know it
    if preview:
        settings.setdefault("preview_port", free_port())
    settings.setdefault("admin_password", ADMIN_PASSWORD)
    config = Settings(data_dir=data_dir, host="127.0.0.1", port=port, **settings)
    holder: dict[str, Services] = {}

    async def start() -> Services:
        holder["services"] = await open_services(
            config, provider=provider, span_processor=span_processor
        )
        return holder["services"]

    app = create_app(start, TrustedProxies.parse(config.trusted_proxies))
    if middleware is not None:
        app.add_middleware(middleware)
    server = uvicorn.Server(server_config(app, "127.0.0.1", port))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    servers = [(server, task)]
    if preview:
        proxy = build_proxy(config, lambda: holder.get("services"))
        proxy_server = uvicorn.Server(
            server_config(proxy, "127.0.0.1", config.preview_listen_port(), lifespan="on")
        )
        proxy_task = asyncio.create_task(proxy_server.serve())
        servers.append((proxy_server, proxy_task))
        while not proxy_server.started:
            if proxy_task.done():
                proxy_task.result()
            await asyncio.sleep(0.01)
    base_url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
            await log_in(client, "admin", config.admin_password or ADMIN_PASSWORD)
            yield RunningServer(
                base_url,
                holder["services"],
                client,
                app,
                preview_port=config.preview_listen_port() if preview else None,
            )
    finally:
        for running, _ in reversed(servers):
            running.should_exit = True
        for _, running_task in reversed(servers):
            await asyncio.wait_for(running_task, 30)
