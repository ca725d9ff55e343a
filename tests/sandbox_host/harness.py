"""A real `burrow sandbox-host` child process, and the stock e2b SDK pointed at it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.api.harness import free_port

API_KEY = "e2b_" + "0123456789abcdef" * 2 + "01234567"
DOMAIN = "sandboxes.test"
OTHER_KEY = "e2b_" + "fedcba9876543210" * 2 + "76543210"


@dataclass(frozen=True)
class Host:
    url: str
    process: subprocess.Popen[bytes]
    data_dir: Path


@contextlib.contextmanager
def sandbox_host(data_dir: Path, **env: str) -> Iterator[Host]:
    """`burrow sandbox-host` on a free port of 127.0.0.1, ready; stopped with SIGTERM so it
    kills its sandboxes (SIGKILL after 10 s)."""
    port = free_port()
    environment = {
        **os.environ,
        "BURROW_SANDBOX_HOST_API_KEYS": f"{API_KEY},{OTHER_KEY}",
        "BURROW_SANDBOX_LIMITS": "false",  # no cgroups: runs unprivileged too
        "BURROW_SANDBOX_NETWORK": "none",
        **env,
    }
    command = [sys.executable, "-m", "burrow.cli", "sandbox-host", "--port", str(port)]
    command += ["--data-dir", str(data_dir), "--domain", DOMAIN]
    process = subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while not _healthy(url):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"sandbox-host did not start (exit {process.poll()})")
            time.sleep(0.05)
        yield Host(url, process, data_dir)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def point_sdk_at(monkeypatch: pytest.MonkeyPatch, host: Host, key: str = API_KEY) -> None:
    """Only the SDK's own variables: nothing in the SDK is changed."""
    monkeypatch.setenv("E2B_API_URL", host.url)
    monkeypatch.setenv("E2B_SANDBOX_URL", host.url)
    monkeypatch.setenv("E2B_API_KEY", key)
    monkeypatch.delenv("E2B_DOMAIN", raising=False)
    monkeypatch.delenv("E2B_DEBUG", raising=False)
