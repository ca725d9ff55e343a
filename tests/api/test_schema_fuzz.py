"""schemathesis against /openapi.json of a real `burrow serve`: no request, logged in or not,
gets a 5xx, and no route answers 2xx without a login."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings

from tests.api.harness import ADMIN_PASSWORD, serve_process

OPEN = {"/api/health", "/api/auth/login", "/api/auth/logout"}
EXAMPLES = 15


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "ok"}]))
    # No network for its sandboxes: the fuzzer boots and hibernates them by the hundred
    # (PATCH network included), and what it checks is the API, not the egress set-up.
    env = {"BURROW_SANDBOX_NETWORK": "none"}
    with serve_process(tmp_path, f"scripted:{script}", env) as (_, base):
        yield base


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
