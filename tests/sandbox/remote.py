"""The e2b backend against a real `burrow sandbox-host` on 127.0.0.1 (a subprocess), for the
conformance suite: the same tests as the local backend, through the stock e2b SDK."""

from __future__ import annotations

import importlib.util
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from burrow.ports import free_port
from tests.conftest import unavailable

START_SECONDS = 20.0


@dataclass(frozen=True)
class SandboxHost:
    url: str
    api_key: str

    @property
    def api(self) -> dict[str, Any]:
        """The SDK's ApiParams that point it at this host (E2B_API_URL, E2B_SANDBOX_URL)."""
        return {"api_key": self.api_key, "api_url": self.url, "sandbox_url": self.url}


@pytest.fixture(scope="session")
def sandbox_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxHost]:
    """`burrow sandbox-host` on a free port with its own data directory and API key."""
    if importlib.util.find_spec("burrow.sandbox_host") is None:
        unavailable("burrow sandbox-host (not in this tree yet)")
    port = free_port()
    data_dir: Path = tmp_path_factory.mktemp("sandbox-host")
    key = "e2b_" + secrets.token_hex(20)
    env = {
        **os.environ,
        "BURROW_SANDBOX_HOST_API_KEYS": key,
        "BURROW_SANDBOX_LIMITS": "false",  # no cgroups: runs unprivileged too
        "BURROW_SANDBOX_NETWORK": "none",
    }
    argv = [sys.executable, "-m", "burrow.cli", "sandbox-host", "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--data-dir", str(data_dir)]
    log = (data_dir / "host.log").open("wb")
    process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            if process.poll() is not None:
                raise AssertionError(
                    f"burrow sandbox-host exited: {(data_dir / 'host.log').read_text()[-2000:]}"
                )
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("burrow sandbox-host did not start in time")
            time.sleep(0.05)
        yield SandboxHost(f"http://127.0.0.1:{port}", key)
    finally:
        process.terminate()  # SIGTERM: it kills its sandboxes
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
