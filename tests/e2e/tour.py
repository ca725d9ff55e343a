"""Helpers for the tour tests (issue 12): a real server, a signed-in page, on-screen checks.

The server is real (`burrow serve` or the in-process harness) and only the model is scripted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import httpx
from playwright.async_api import Browser, Locator, Page, expect

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import ADMIN_PASSWORD, RunningServer, free_port, running_server

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1440, "height": 900}
SLOW = 30_000  # ms: waits that span a server start on a busy 2-core machine


class ServeProcess:
    """`burrow serve` as a child on a fixed port, so it can be killed and started again."""

    def __init__(self, data_dir: Path, model: str) -> None:
        self.data_dir = data_dir
        self.model = model
        self.port = free_port()
        self.preview_port = free_port()
        self.base = f"http://localhost:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "BURROW_ADMIN_PASSWORD": ADMIN_PASSWORD}
        command = [sys.executable, "-m", "burrow.cli", "serve", "--port", str(self.port)]
        command += ["--preview-port", str(self.preview_port), "--data-dir", str(self.data_dir)]
        self.process = subprocess.Popen([*command, "--model", self.model], env=env)
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.base}/api/health", timeout=1).status_code == 200:
                    return
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"burrow serve did not become healthy ({self.process.poll()})")
            time.sleep(0.05)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)


@contextlib.contextmanager
def serve(tmp_path: Path, turns: list[dict[str, object]]) -> Iterator[ServeProcess]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(turns))
    server = ServeProcess(tmp_path / "data", f"scripted:{script}")
    server.start()
    try:
        yield server
    finally:
        server.kill()


def base_of(srv: RunningServer) -> str:
    return srv.base_url.replace("127.0.0.1", "localhost")


async def sign_in(page: Page, base: str, path: str = "/") -> None:
    login = {"username": "admin", "password": ADMIN_PASSWORD}
    assert (await page.request.post(f"{base}/api/auth/login", data=login)).ok
    await page.goto(base + path)
    await expect(page.get_by_role("navigation", name="Conversations")).to_be_visible()


@contextlib.asynccontextmanager
async def harness(
    tmp_path: Path, browser: Browser, turns: list[ScriptedTurn], viewport: dict[str, int]
) -> AsyncIterator[tuple[RunningServer, Page]]:
    """An in-process server with a scripted model, and a page signed in to it."""
    provider = ScriptedProvider(turns, chunk_delay=0.02)
    async with running_server(tmp_path, lambda: provider) as srv:
        context = await browser.new_context(viewport=viewport)  # type: ignore[arg-type]
        context.set_default_timeout(15_000)
        try:
            yield srv, await context.new_page()
        finally:
            await context.close()  # its streams first, so the server can stop


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 30) -> None:
    """Wait until `check()` holds (polled: a condition, not a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        await asyncio.sleep(0.1)


async def unobstructed(page: Page, locator: Locator) -> bool:
    """Whether `locator` is on screen and on top at its centre (not under the composer)."""
    box = await locator.bounding_box()
    if box is None:
        return False
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    viewport = page.viewport_size or {"width": 0, "height": 0}
    if not (0 <= x < viewport["width"] and 0 <= y < viewport["height"]):
        return False
    hit: bool = await locator.evaluate(
        "(el, [x, y]) => el.contains(document.elementFromPoint(x, y))", [x, y]
    )
    return hit
