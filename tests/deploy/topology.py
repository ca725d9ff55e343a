"""deploy/compose.yaml's topology as processes on 127.0.0.1: a PostgreSQL database, a
`burrow sandbox-host`, `burrow serve` replicas on the e2b backend pointed at the sandbox
host through the proxy's gateway, and nginx with the deployment's routes in front."""

from __future__ import annotations

import base64
import contextlib
import importlib.util
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.api.harness import ADMIN_PASSWORD, free_port
from tests.conftest import unavailable
from tests.deploy.proxy import Proxy, Upstreams, running_proxy

START_SECONDS = 30.0
# Replicas share the key that seals stored secrets (compose.yaml: BURROW_SECRET_KEY).
SECRET_KEY = base64.urlsafe_b64encode(b"deploy-topology-shares-this-key!").decode()
SANDBOX_HOST_NAME = "sbx1"
NEEDS = {
    "burrow.sandbox_host": "issue 16 part 4, burrow sandbox-host",
    "burrow.sandbox.e2b": "issue 16 part 3, the e2b backend",
    "burrow.store.leases": "issue 16 part 2, replicas",
}


@dataclass(frozen=True)
class Replica:
    name: str
    port: int
    preview_port: int

    @property
    def app(self) -> str:
        return f"127.0.0.1:{self.port}"


@dataclass(frozen=True)
class Topology:
    proxy: Proxy
    replicas: list[Replica]
    sandbox_host: str  # its base URL, for a look at what runs there
    api_key: str


def _wait_listening(process: subprocess.Popen[bytes], port: int, what: str, log: Path) -> None:
    deadline = time.monotonic() + START_SECONDS
    while True:
        if process.poll() is not None:
            raise AssertionError(f"{what} exited: {log.read_text()[-3000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} did not listen: {log.read_text()[-3000:]}") from None
            time.sleep(0.05)


def _wait_healthy(node: Replica, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_SECONDS
    while True:
        if process.poll() is not None:
            raise AssertionError(f"{node.name} exited: {log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://{node.app}/api/health", timeout=2) as answer:
                if answer.status == 200:
                    return
        except (OSError, urllib.error.HTTPError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{node.name} never answered healthy: {log.read_text()[-3000:]}")
        time.sleep(0.05)


@contextlib.contextmanager
def _process(argv: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            yield process
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.contextmanager
def topology(
    tmp_path: Path, database_url: str, model: str, replicas: int = 2
) -> Iterator[Topology]:
    # The parts of issue 16 this topology is made of; until each is merged, locally a skip
    # (in CI a failure) that names it.
    for module, part in NEEDS.items():
        if importlib.util.find_spec(module) is None:
            unavailable(f"{module} ({part}, not merged into this tree yet)")
    proxy = Proxy(free_port(), free_port())
    key = "e2b_" + secrets.token_hex(20)
    with contextlib.ExitStack() as stack:
        host_port = free_port()
        host_dir = tmp_path / SANDBOX_HOST_NAME
        host_dir.mkdir()
        host_env = {
            **os.environ,
            "BURROW_SANDBOX_HOST_API_KEYS": key,
            "BURROW_SANDBOX_HOST_NAME": SANDBOX_HOST_NAME,
        }
        argv = [sys.executable, "-m", "burrow.cli", "sandbox-host", "--host", "127.0.0.1"]
        argv += ["--port", str(host_port), "--data-dir", str(host_dir)]
        host_log = tmp_path / "sandbox-host.log"
        host = stack.enter_context(_process(argv, host_env, host_log))
        _wait_listening(host, host_port, "burrow sandbox-host", host_log)

        nodes, processes = [], []
        for index in range(1, replicas + 1):
            node = Replica(f"burrow-{index}", free_port(), free_port())
            data_dir = tmp_path / node.name
            data_dir.mkdir()
            env = {
                **os.environ,
                "BURROW_ADMIN_PASSWORD": ADMIN_PASSWORD,
                "BURROW_DATABASE_URL": database_url,
                "BURROW_REPLICA_ID": node.name,
                "BURROW_SECRET_KEY": SECRET_KEY,
                "BURROW_TRUSTED_PROXIES": "127.0.0.1",
                "BURROW_PREVIEW_DOMAIN": f"http://preview.localhost:{proxy.port}",
                "BURROW_SANDBOX": "e2b",
                "BURROW_E2B_HIBERNATION": "files",
                "E2B_API_KEY": key,
                "E2B_API_URL": proxy.gateway,
                "E2B_SANDBOX_URL": proxy.gateway,
            }
            argv = [sys.executable, "-m", "burrow.cli", "serve", "--port", str(node.port)]
            argv += ["--preview-port", str(node.preview_port), "--data-dir", str(data_dir)]
            argv += ["--model", model]
            log = tmp_path / f"{node.name}.log"
            process = stack.enter_context(_process(argv, env, log))
            _wait_listening(process, node.port, node.name, log)
            nodes.append(node)
            processes.append(process)

        # Started side by side (as compose starts them), and all of them up before the
        # proxy sends them anything: a request that lands mid-start waits on it, and a start
        # that fails shows here with its log rather than as the proxy's 503 later.
        for node, process in zip(nodes, processes, strict=True):
            _wait_healthy(node, process, tmp_path / f"{node.name}.log")

        upstreams = Upstreams(
            apps=[n.app for n in nodes],
            previews=[f"127.0.0.1:{n.preview_port}" for n in nodes],
            sandbox_hosts={SANDBOX_HOST_NAME: f"127.0.0.1:{host_port}"},
        )
        stack.enter_context(running_proxy(tmp_path / "nginx", proxy, upstreams))
        yield Topology(proxy, nodes, f"http://127.0.0.1:{host_port}", key)
