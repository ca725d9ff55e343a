"""A new user's tour of the UI (issue 12): each defect they met, in a real browser.

The server is real (`burrow serve` or the in-process harness) and only the model is scripted.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
from playwright.async_api import Browser, Page, expect

from tests.api.harness import ADMIN_PASSWORD, free_port
from tests.e2e.conftest import shot

PHONE = {"width": 390, "height": 844}
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


async def sign_in(page: Page, base: str, path: str = "/") -> None:
    login = {"username": "admin", "password": ADMIN_PASSWORD}
    assert (await page.request.post(f"{base}/api/auth/login", data=login)).ok
    await page.goto(base + path)
    await expect(page.get_by_role("navigation", name="Conversations")).to_be_visible()


async def test_a_server_killed_mid_run_leaves_a_failed_run_not_a_blank_page(
    tmp_path: Path, browser: Browser
) -> None:
    context = await browser.new_context(viewport={"width": 1440, "height": 900})
    context.set_default_timeout(30_000)
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    text = " ".join(f"word{i}" for i in range(200))
    with serve(tmp_path, [{"text": text, "delay": 0.05}]) as server:
        try:
            await sign_in(page, server.base)
            composer = page.get_by_label("Message")
            await composer.fill("Tell me a long story")
            await composer.press("Enter")
            await expect(page.locator(".assistant")).to_contain_text("word10")
            server.kill()
            await expect(page.locator(".pill[data-connection=reconnecting]")).to_be_visible(
                timeout=SLOW
            )
            server.start()
            # The repaired run.finished arrives on reconnect: a failed run, a usable app.
            await expect(page.locator(".run-end.failed")).to_be_visible(timeout=SLOW)
            await expect(page.locator(".run-end.failed")).to_contain_text("tokens")
            await expect(page.get_by_label("Message")).to_be_visible()
            await page.reload()
            await expect(page.locator(".run-end.failed")).to_be_visible(timeout=SLOW)
            await expect(page.get_by_label("Message")).to_be_visible()
            await shot(page, "tour-1-restarted")
            assert not errors, errors
        finally:
            await context.close()
