"""schemathesis against /openapi.json of a real `burrow serve`: no request, logged in or not,
gets a 5xx, and no route answers 2xx without a login."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings

from tests.api.harness import ADMIN_PASSWORD, free_port

OPEN = {"/api/health", "/api/auth/login", "/api/auth/logout"}
EXAMPLES = 15


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    data = tmp_path
    script = data / "script.json"
    script.write_text(json.dumps([{"text": "ok"}]))
    port = free_port()
    env = {**os.environ, "BURROW_ADMIN_PASSWORD": ADMIN_PASSWORD}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "BURROW_MODEL"):
        env.pop(name, None)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "burrow.cli",
            "serve",
            "--port",
            str(port),
            "--data-dir",
            str(data),
            "--model",
            f"scripted:{script}",
        ],
        env=env,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            if httpx.get(f"{base}/api/health").status_code == 200:
                break
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    yield base
    process.terminate()
    process.wait(10)


def _session(base: str) -> requests.Session:
    session = requests.Session()
    response = session.post(
        f"{base}/api/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}
    )
    assert response.status_code == 200
    return session


def _operations(base: str) -> list[schemathesis.APIOperation]:
    schema = schemathesis.openapi.from_dict(requests.get(f"{base}/openapi.json").json())
    return [result.ok() for result in schema.get_all_operations()]


def _strategy(operation: schemathesis.APIOperation, cid: str) -> object:
    overrides: dict[str, object] = {}
    if "{cid}" in operation.path:
        overrides["path_parameters"] = {"cid": cid}  # a real conversation, not only 404s
    if operation.path.endswith("/events"):
        overrides["query"] = {"format": "json"}  # the SSE stream never ends by design
    return operation.as_strategy(**overrides)  # type: ignore[arg-type]


def test_no_server_errors_when_logged_in(server: str) -> None:
    session = _session(server)
    cid = session.post(f"{server}/api/conversations", json={"title": "fuzz"}).json()["id"]
    for operation in _operations(server):
        if operation.path == "/api/auth/logout":
            continue  # it would end the fuzzing session itself

        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
        @given(case=_strategy(operation, cid))
        def check(case: schemathesis.Case) -> None:
            response = case.call(base_url=server, session=session, timeout=30)
            assert response.status_code < 500, (case.as_curl_command(), response.text)

        check()


def test_nothing_is_usable_without_a_login(server: str) -> None:
    cid = _session(server).post(f"{server}/api/conversations", json={}).json()["id"]
    for operation in _operations(server):
        if operation.path in OPEN:
            continue

        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
        @given(case=_strategy(operation, cid))
        def check(case: schemathesis.Case) -> None:
            response = case.call(base_url=server, session=requests.Session(), timeout=30)
            assert response.status_code in (400, 401, 415, 422), (
                case.as_curl_command(),
                response.status_code,
            )
            assert not 200 <= response.status_code < 300

        check()
